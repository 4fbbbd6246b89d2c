package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/countersign/countersign"
)

// pageCSP allows the page's own script and styles and nothing else: no
// inline script or style, no framing, forms only to the server itself.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// pageHandler is a page handler that returns its error instead of writing
// it.
type pageHandler func(w http.ResponseWriter, r *http.Request) error

// page wraps a page handler: security headers, the Host check, the POST
// origin check, and errors rendered as pages.
func (s *Server) page(h pageHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", pageCSP)
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("X-Content-Type-Options", "nosniff")
		// same-origin, not no-referrer: under no-referrer a browser sends
		// "Origin: null" with every form POST, even to its own origin
		// (Fetch, "serializing a request origin"), and checkOrigin must
		// refuse null. same-origin still sends nothing to any other site.
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("Cache-Control", "no-store")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
		err := s.checkHost(r)
		if err == nil && r.ContentLength > maxBody {
			// Forms read less (see their readers); no page takes more.
			err = tooLarge(maxBody)
		}
		if err == nil && r.Method == http.MethodPost {
			err = s.checkOrigin(r)
		}
		if err == nil {
			err = h(w, r)
		}
		if err != nil {
			s.writePageError(w, r, err)
		}
	}
}

// checkHost refuses a request for another host than the public URL's, so
// that a DNS-rebinding page cannot talk to the inbox under its own name.
func (s *Server) checkHost(r *http.Request) error {
	if !strings.EqualFold(r.Host, s.cfg.PublicURL.Host) {
		return countersign.Errorf(countersign.EMISDIRECTED, "This server answers only as %s. Open it at %s.", s.cfg.PublicURL.Host, s.cfg.PublicURL.String())
	}
	return nil
}

// rightAddress is the page a request under a wrong Host meant, at the
// public URL: the same page for a GET of one of the server's own pages,
// the inbox otherwise.
func (s *Server) rightAddress(r *http.Request) string {
	to := "/approvals"
	if p, ok := safeReturn(r.URL.RequestURI()); ok && r.Method == http.MethodGet {
		to = p
	}
	return strings.TrimRight(s.cfg.PublicURL.String(), "/") + to
}

// checkOrigin lets a POST through only from the inbox itself: Origin equal
// to the public origin, or, without Origin, Sec-Fetch-Site same-origin.
// Origin "null" never passes.
func (s *Server) checkOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin != "" {
		if origin == s.publicOrigin() {
			return nil
		}
		return countersign.Errorf(countersign.EFORBIDDEN, "This form was sent from another site, so it was refused. Open the inbox at %s and try again.", s.cfg.PublicURL.String())
	}
	if r.Header.Get("Sec-Fetch-Site") == "same-origin" {
		return nil
	}
	return countersign.Errorf(countersign.EFORBIDDEN, "This form was sent without saying where from, so it was refused. Open the inbox at %s and try again.", s.cfg.PublicURL.String())
}

func (s *Server) publicOrigin() string {
	u := s.cfg.PublicURL
	return u.Scheme + "://" + u.Host
}

// csrfToken is the form token of a session: an HMAC of the session's id
// under the server's CSRF key, so it is bound to the session and useless
// without it.
func (s *Server) csrfToken(sessionID string) string {
	m := hmac.New(sha256.New, s.csrfKey)
	m.Write([]byte("csrf\x00" + sessionID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkCSRF compares a form's token with the session's in constant time.
func (s *Server) checkCSRF(r *http.Request, sessionID string) error {
	got := r.PostFormValue("csrf")
	if got == "" || sessionID == "" || !hmac.Equal([]byte(got), []byte(s.csrfToken(sessionID))) {
		return countersign.Errorf(countersign.EFORBIDDEN, "This form has expired or did not come from your session. Reload the page and try again.")
	}
	return nil
}

// errorPage is the data of the error page.
type errorPage struct {
	pageBase
	Status  int
	Heading string
	Message string
	// Link is where to go instead: the same page at the public URL, for
	// a request under another Host; "" for the inbox.
	Link string
}

// writePageError renders an error as a page with the right status.
// Internal errors are logged with an id and shown with that id only.
func (s *Server) writePageError(w http.ResponseWriter, r *http.Request, err error) {
	code := countersign.ErrorCode(err)
	status, ok := statusOf[code]
	if !ok {
		status = http.StatusInternalServerError
	}
	msg := countersign.ErrorMessage(err)
	if code == countersign.EINTERNAL && r.Context().Err() != nil {
		// The browser went away mid-request, as in writeAPIError.
		s.log.Debug("client gone", "route", r.Pattern, "err", err)
		code, status, msg = countersign.EUNAVAILABLE, http.StatusServiceUnavailable, "The request was cancelled."
	}
	if reason, ok := s.cannotWrite(r, err); ok {
		code, status, msg = countersign.EUNAVAILABLE, http.StatusServiceUnavailable, reason+"; try again later."
		w.Header().Set("Retry-After", retryAfter(cannotWriteRetry))
	}
	if code == countersign.EINTERNAL {
		id := countersign.NewID("")[:10]
		s.log.Error("internal error", "error_id", id, "route", r.Pattern, "err", err)
		msg = "Something went wrong on the server. The log has the details under id " + id + "."
	}
	var e *countersign.Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		w.Header().Set("Retry-After", retryAfter(e.RetryAfter))
	}
	heading, link := http.StatusText(status), ""
	switch code {
	case countersign.ENOTFOUND:
		heading, msg = "Not found", "There is no such request in this account."
	case countersign.EMISDIRECTED:
		heading, link = "Wrong address", s.rightAddress(r)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if rerr := s.pages.Render(w, "error", errorPage{Status: status, Heading: heading, Message: msg, Link: link}); rerr != nil {
		s.log.Error("render error page", "err", rerr)
	}
}

// render writes a page with the status.
func (s *Server) render(w http.ResponseWriter, status int, page string, data any) error {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	return s.pages.Render(w, page, data)
}

// safeNext returns next when it is one of the server's own page paths, and
// the inbox otherwise, so that the sign-in form is no open redirect.
func safeNext(next string) string {
	if p, ok := safeReturn(next); ok {
		return p
	}
	return "/approvals"
}

// safeReturn returns next, and true, only when it is a relative path of
// one of the server's own pages (no scheme, no host, no "//" or "\" that
// a browser would read as another host, no control characters): where a
// form may send the browser back to after a POST.
func safeReturn(next string) (string, bool) {
	if next == "" || len(next) > 2048 || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n\t") {
		return "", false
	}
	for _, c := range next {
		if c < 0x20 || c == 0x7f {
			return "", false
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || path.Clean(u.Path) != u.Path {
		// A dot segment would lead the browser out of the page it names.
		return "", false
	}
	for _, p := range []string{"/approvals", "/sessions", "/grants", "/passkeys", "/oauth/authorize", "/uploads/", "/files/"} {
		if u.Path == p || strings.HasPrefix(u.Path, strings.TrimSuffix(p, "/")+"/") {
			return u.EscapedPath() + queryOf(u), true
		}
	}
	return "", false
}

func queryOf(u *url.URL) string {
	if u.RawQuery == "" {
		return ""
	}
	return "?" + u.RawQuery
}
