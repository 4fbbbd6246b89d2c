package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/visible"
)

// localPage is ADR 0003's approval page of the standalone gateway: a small
// HTTP server on 127.0.0.1 that shows one request per secret link and takes
// one decision. The link is a capability, so it goes only to the system's
// opener, never into an MCP message or a log. It starts at the first
// request that needs it.
type localPage struct {
	svc   *approval.Service
	agent countersign.Agent
	openf func(string) error
	log   *slog.Logger

	mu     sync.Mutex
	srv    *http.Server
	origin string            // http://127.0.0.1:PORT
	links  map[string]string // hash of a link's token → request id
}

func newLocalPage(svc *approval.Service, agent countersign.Agent, open func(string) error, log *slog.Logger) *localPage {
	return &localPage{svc: svc, agent: agent, openf: open, log: log, links: map[string]string{}}
}

// open makes a link for the request and opens it.
func (p *localPage) open(_ context.Context, id string) error {
	origin, err := p.start()
	if err != nil {
		return err
	}
	b := make([]byte, 32)
	rand.Read(b)
	token := hex.EncodeToString(b)
	p.mu.Lock()
	p.links[countersign.HashSecret(token)] = id
	p.mu.Unlock()
	return p.openf(origin + "/confirm/" + token)
}

// start listens on a free port of 127.0.0.1, once.
func (p *localPage) start() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv != nil {
		return p.origin, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("listen on 127.0.0.1: %w", err)
	}
	p.origin = "http://" + ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /confirm/{token}", p.show)
	mux.HandleFunc("POST /confirm/{token}", p.decide)
	p.srv = &http.Server{Handler: p.guard(mux), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, MaxHeaderBytes: 16 << 10}
	go p.srv.Serve(ln)
	return p.origin, nil
}

func (p *localPage) close() {
	p.mu.Lock()
	srv := p.srv
	p.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// guard sets the page headers and refuses another Host (DNS rebinding) and
// a POST from another origin.
func (p *localPage) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		// same-origin, not no-referrer: under no-referrer a browser sends
		// Origin: null with the page's own form post.
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		if "http://"+r.Host != p.origin {
			http.Error(w, "wrong host", http.StatusMisdirectedRequest)
			return
		}
		// A decision comes only from the page itself: a browser says so
		// with Origin or Sec-Fetch-Site. A bare POST (curl by a process
		// that read the link from the opener's command line) says neither.
		if r.Method == http.MethodPost && !sameOrigin(r, p.origin) {
			http.Error(w, "only the approval page itself can decide", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// request finds the request of a link.
func (p *localPage) request(r *http.Request) (*countersign.Request, string, error) {
	token := r.PathValue("token")
	p.mu.Lock()
	id, ok := p.links[countersign.HashSecret(token)]
	p.mu.Unlock()
	if !ok {
		return nil, "", countersign.Errorf(countersign.ENOTFOUND, "no such confirmation")
	}
	req, err := p.svc.Get(r.Context(), p.agent, id)
	return req, token, err
}

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{"visible": visible.String}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>countersign · {{.Ref}}</title></head><body>
<h1>countersign: confirm an MCP tool call</h1>
<p>Request <strong>{{.Ref}}</strong> · {{.Status}}{{if .Pending}} · expires {{.Expires}}{{end}}</p>
<pre>{{visible .Preview}}</pre>
{{if .Pending}}
<form method="post"><input type="hidden" name="decision" value="approve"><button type="submit">Approve once</button></form>
<form method="post"><input type="hidden" name="decision" value="deny"><button type="submit">Deny</button></form>
{{else}}<p>{{.Done}}</p>{{end}}
</body></html>`))

type pageData struct {
	Ref, Status, Preview, Expires, Done string
	Pending                             bool
}

func (p *localPage) render(w http.ResponseWriter, req *countersign.Request, done string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = pageTemplate.Execute(w, pageData{Ref: countersign.FormatReference(req.Reference), Status: string(req.Status),
		Preview: req.Preview, Expires: req.ExpiresAt.Local().Format("15:04:05"), Done: done,
		Pending: req.Status == countersign.StatusPending})
}

func (p *localPage) show(w http.ResponseWriter, r *http.Request) {
	req, _, err := p.request(r)
	if err != nil {
		http.Error(w, "This confirmation does not exist or is over.", http.StatusNotFound)
		return
	}
	p.render(w, req, "This request is "+string(req.Status)+". You can close this page.")
}

func (p *localPage) decide(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 1024)
	req, _, err := p.request(r)
	if err != nil {
		http.Error(w, "This confirmation does not exist or is over.", http.StatusNotFound)
		return
	}
	d := countersign.Decision(r.PostFormValue("decision"))
	if d != countersign.DecisionApprove && d != countersign.DecisionDeny {
		http.Error(w, "decision must be approve or deny", http.StatusBadRequest)
		return
	}
	ap := countersign.ApproverPrincipal{Username: "local-page", AccountID: p.agent.AccountID}
	got, err := p.svc.Decide(r.Context(), ap, req.ID, countersign.DecisionInput{Decision: d})
	if countersign.ErrorCode(err) == countersign.ECONFLICT {
		got, err = p.svc.Get(r.Context(), p.agent, req.ID)
	}
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			p.log.Error("local page decision", "request", req.ID, "err", err)
		}
		http.Error(w, "The decision could not be recorded.", http.StatusInternalServerError)
		return
	}
	done := "Denied. The agent will be told. You can close this page."
	if got.Status == countersign.StatusApproved {
		done = "Approved once. Go back to the agent: its next try of this call runs it. You can close this page."
	} else if got.Status != countersign.StatusDenied {
		done = "This request is " + string(got.Status) + ". You can close this page."
	}
	p.render(w, got, done)
}

// sameOrigin reports whether a browser sent the request from origin: Origin
// equal to it, or, without Origin, Sec-Fetch-Site same-origin.
func sameOrigin(r *http.Request, origin string) bool {
	if o := r.Header.Get("Origin"); o != "" {
		return o == origin
	}
	return r.Header.Get("Sec-Fetch-Site") == "same-origin"
}
