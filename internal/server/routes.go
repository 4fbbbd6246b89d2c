package server

import (
	"net/http"
	"time"

	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/web"
)

// routes lists every route of the server in one place.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()

	mux.HandleFunc("GET /healthz", s.bodiless(s.healthz))
	mux.HandleFunc("GET /metrics", s.bodiless(s.metrics))

	// The v1 API: agents ask, wait, consume and cancel; approvers list and
	// decide.
	mux.HandleFunc("POST /api/v1/requests", s.api(s.agent(s.createRequest)))
	mux.HandleFunc("GET /api/v1/requests/{id}", s.api(s.agent(s.getRequest)))
	mux.HandleFunc("POST /api/v1/requests/{id}/consume", s.api(s.agent(s.consumeRequest)))
	mux.HandleFunc("POST /api/v1/requests/take", s.api(s.agent(s.takeApproval)))
	mux.HandleFunc("POST /api/v1/requests/ran", s.api(s.agent(s.reportRan)))
	mux.HandleFunc("POST /api/v1/requests/{id}/cancel", s.api(s.agent(s.cancelRequest)))
	mux.HandleFunc("GET /api/v1/requests", s.api(s.approver(s.listRequests)))
	mux.HandleFunc("POST /api/v1/requests/{id}/decision", s.api(s.approver(s.decideRequest)))
	mux.HandleFunc("POST /api/v1/hooks/claude", s.claudeHook)
	s.accountRoutes(mux)
	mux.HandleFunc("/api/", s.api(s.apiNotFound))

	// The seed's safe-rm API, with its paths, fields and status codes.
	mux.HandleFunc("GET /health", s.bodiless(s.seedHealth))
	mux.HandleFunc("POST /api/delete-requests", s.api(s.createDeleteRequest))
	mux.HandleFunc("GET /api/delete-requests", s.api(s.approver(s.listDeleteRequests)))
	mux.HandleFunc("GET /api/delete-requests/{id}/status", s.api(s.deleteRequestStatus))
	for _, action := range []string{approval.LinkApprove, approval.LinkDeny} {
		path := "/api/delete-requests/" + action + "/{id}/{token}"
		mux.HandleFunc("GET "+path, s.page(s.linkPage("delete:", action)))
		mux.HandleFunc("POST "+path, s.page(s.linkPage("delete:", action)))
	}
	mux.HandleFunc("POST /api/claude-events", s.api(s.createClaudeEvent))
	mux.HandleFunc("GET /api/claude-events", s.api(s.approver(s.listClaudeEvents)))
	mux.HandleFunc("GET /api/claude-events/{id}/status", s.api(s.claudeEventStatus))
	for _, action := range []string{approval.LinkApprove, approval.LinkDeny, approval.LinkRespond} {
		path := "/api/claude-events/" + action + "/{id}/{token}"
		mux.HandleFunc("GET "+path, s.page(s.linkPage("claude:", action)))
		mux.HandleFunc("POST "+path, s.page(s.linkPage("claude:", action)))
	}
	mux.HandleFunc("GET /api/claude-events/auto-approve/{id}/{token}/{minutes}", s.page(s.linkPage("claude:", approval.LinkAutoApprove)))
	mux.HandleFunc("POST /api/claude-events/auto-approve/{id}/{token}/{minutes}", s.page(s.linkPage("claude:", approval.LinkAutoApprove)))
	mux.HandleFunc("/links/{token}", s.page(s.tokenLinkPage)) // the links of notifications (notifylinks.go)

	// The inbox (ADR 0007): pages behind an approver's browser session.
	mux.HandleFunc("GET /{$}", s.page(func(w http.ResponseWriter, r *http.Request) error {
		http.Redirect(w, r, "/approvals", http.StatusSeeOther)
		return nil
	}))
	mux.HandleFunc("GET /signin", s.page(s.signinForm))
	mux.HandleFunc("POST /signin", s.page(s.signin))
	mux.HandleFunc("POST /signout", s.page(s.signedIn(s.signout)))
	mux.HandleFunc("GET /sessions", s.page(s.signedIn(s.sessionList)))
	mux.HandleFunc("POST /sessions/signout-all", s.page(s.signedIn(s.signoutEverywhere)))
	mux.HandleFunc("POST /account", s.page(s.signedIn(s.switchAccount)))
	mux.HandleFunc("GET /approvals", s.page(s.signedIn(s.inbox)))
	mux.HandleFunc("GET /approvals/events", s.page(s.signedIn(s.events)))
	mux.HandleFunc("GET /approvals/{id}", s.page(s.signedIn(s.requestDetail)))
	mux.HandleFunc("POST /approvals/{id}/decision", s.page(s.signedIn(s.decide)))
	mux.HandleFunc("GET /approvals/{id}/edit", s.page(s.signedIn(s.editRequest)))
	mux.HandleFunc("POST /approvals/{id}/edit", s.page(s.signedIn(s.previewEdit)))
	s.passkeyRoutes(mux)
	mux.HandleFunc("GET /grants", s.page(s.signedIn(s.grantList)))
	mux.HandleFunc("POST /grants/{id}/revoke", s.page(s.signedIn(s.revokeGrant)))

	// OAuth for remote MCP clients (oauth.go, oauth_consent.go).
	mux.HandleFunc("GET /.well-known/oauth-protected-resource", s.bodiless(s.protectedResource))
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", s.bodiless(s.protectedResource))
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", s.bodiless(s.authorizationServer))
	mux.HandleFunc("POST /oauth/register", s.oauthAPI(s.registrations, s.register))
	mux.HandleFunc("POST /oauth/token", s.oauthAPI(s.oauthRate, s.token))
	mux.HandleFunc("POST /oauth/revoke", s.oauthAPI(s.oauthRate, s.revoke))
	mux.HandleFunc("GET /oauth/authorize", s.page(s.authorize))
	mux.HandleFunc("POST /oauth/authorize", s.page(s.signedIn(s.consent)))
	mux.HandleFunc("POST /oauth/authorize/passkey", s.page(s.jsonPage(s.signedIn(s.beginConsentPasskey))))

	// File transfer (ADR 0008): upload pages and downloads, behind the
	// same sessions.
	// A record another replica holds is passed on to it (filereplicas.go).
	mux.HandleFunc("GET /uploads/{id}", s.atHolder(s.page(s.signedIn(s.uploadForm))))
	mux.HandleFunc("POST /uploads/{id}", s.atHolder(s.upload)) // its own checks, before the body (uploads.go)
	mux.HandleFunc("GET /files/{id}", s.atHolder(s.page(s.signedIn(s.download))))
	mux.HandleFunc("GET /internal/uploads/{id}", s.internalUpload)
	mux.Handle("GET /static/", s.bodiless(s.static().ServeHTTP))
	mux.Handle("/mcp", s.mcpEndpoint()) // the MCP gateway, for agent keys (mcp.go)

	return s.observe(mux)
}

// observe counts and logs every request by its route pattern, never by its
// path, which can hold tokens of link routes.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		s.observed(r, sw.status, start)
	})
}

// bodiless wraps a route that reads no body: like every other route, it
// refuses one declared larger than maxBody.
func (s *Server) bodiless(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > maxBody {
			s.writeAPIError(w, r, tooLarge(maxBody))
			return
		}
		h(w, r)
	}
}

// observed counts and logs a request that has been answered. It is a call
// of its own so that the frame of observe, under every handler and every
// parked long poll, stays small.
//
//go:noinline
func (s *Server) observed(r *http.Request, status int, start time.Time) {
	route := r.Pattern
	if route == "" {
		route = "unmatched"
	}
	s.httpRequests.Inc(route, statusText(status))
	s.log.Debug("http", "method", r.Method, "route", route, "status", status, "duration_ms", time.Since(start).Milliseconds())
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection, for the write
// deadline of long polls.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func statusText(code int) string {
	const digits = "0123456789"
	if code < 100 || code > 999 {
		return "000"
	}
	return string([]byte{digits[code/100], digits[code/10%10], digits[code%10]})
}

// static serves the embedded CSS and script, with the page headers and a
// day of caching. They are served under any Host: they are the same
// public files for everyone and read nothing of a session, and the page
// that says a Host is wrong (421) needs its stylesheet there.
func (s *Server) static() http.Handler {
	files := http.StripPrefix("/static/", http.FileServerFS(web.Static()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", "default-src 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "public, max-age=86400")
		files.ServeHTTP(w, r)
	})
}
