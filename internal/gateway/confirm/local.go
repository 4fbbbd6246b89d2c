package confirm

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/web"
)

// localPage is ADR 0003's approval page of the standalone gateway: a small
// HTTP server on 127.0.0.1 that shows one request and takes one decision.
//
// Nothing secret goes to the system's opener, whose command line every
// process may read in /proc: the opener gets the path of a file in a
// private directory (0700) that sends the browser on to a one-time link.
// The first GET of that link removes the file and trades the link for an
// HttpOnly cookie bound to the request's page; a second GET is told the
// link was already opened and gets nothing. Showing and deciding need the
// cookie, and deciding a POST from the page's own origin. Code that runs as
// the same user can still read the file before the browser does: the page
// protects against a model that only talks, not against such code.
type localPage struct {
	templates *web.LocalPages
	svc       *approval.Service
	agent     countersign.Agent
	openf     func(string) error
	dir       string // the private directory of the files handed to the opener
	log       *slog.Logger

	mu     sync.Mutex
	srv    *http.Server
	origin string               // http://127.0.0.1:PORT
	links  map[string]*pageLink // hash of a one-time link's token → its page
	pages  map[string]*pageLink // a page's handle → the page
}

// pageLink is the local page of one request.
type pageLink struct {
	id     string // the request
	handle string // names the page in its path; not a credential
	file   string // handed to the opener; removed once the link is opened
	opened bool
	cookie string // hash of the cookie the first opening got
}

// pageCookie carries a page's cookie; its path is the page's.
const pageCookie = "countersign_page"

// newLocalPage returns the local page of the service's requests. It fails
// when a page template is broken, before any request needs the page.
func newLocalPage(svc *approval.Service, agent countersign.Agent, open func(string) error, dir string, log *slog.Logger) (*localPage, error) {
	templates, err := web.ParseLocal()
	if err != nil {
		return nil, err
	}
	return &localPage{templates: templates, svc: svc, agent: agent, openf: open, dir: dir, log: log,
		links: map[string]*pageLink{}, pages: map[string]*pageLink{}}, nil
}

// open makes a page for the request and hands the opener a file that leads
// to it.
func (p *localPage) open(_ context.Context, id string) error {
	origin, err := p.start()
	if err != nil {
		return err
	}
	token, handle := randomHex(32), randomHex(12)
	file, err := p.writeFile(origin + "/open/" + token)
	if err != nil {
		return err
	}
	l := &pageLink{id: id, handle: handle, file: file}
	p.mu.Lock()
	p.links[countersign.HashSecret(token)], p.pages[handle] = l, l
	p.mu.Unlock()
	if err := p.openf(file); err != nil {
		os.Remove(file)
		return err
	}
	return nil
}

// writeFile writes a page that sends the browser to link, readable only by
// this user, in the private directory.
func (p *localPage) writeFile(link string) (string, error) {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return "", fmt.Errorf("create the directory of the confirmation pages: %w", err)
	}
	if err := os.Chmod(p.dir, 0o700); err != nil {
		return "", fmt.Errorf("make the directory of the confirmation pages private: %w", err)
	}
	file := filepath.Join(p.dir, "confirm-"+randomHex(8)+".html")
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("write the confirmation page: %w", err)
	}
	err = p.templates.Redirect(f, link)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(file)
		return "", fmt.Errorf("write the confirmation page: %w", err)
	}
	return file, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// start listens on a free port of 127.0.0.1, once.
func (p *localPage) start() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv != nil {
		return p.origin, nil
	}
	// Files of an earlier run lead to links that died with it.
	if old, _ := filepath.Glob(filepath.Join(p.dir, "confirm-*.html")); len(old) > 0 {
		for _, f := range old {
			os.Remove(f)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("listen on 127.0.0.1: %w", err)
	}
	p.origin = "http://" + ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /open/{token}", p.opening)
	mux.HandleFunc("GET /confirm/{handle}", p.show)
	mux.HandleFunc("POST /confirm/{handle}", p.decide)
	p.srv = &http.Server{Handler: p.guard(mux), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, MaxHeaderBytes: 16 << 10}
	go p.srv.Serve(ln)
	return p.origin, nil
}

func (p *localPage) close() {
	p.mu.Lock()
	srv := p.srv
	for _, l := range p.pages {
		if !l.opened {
			os.Remove(l.file)
		}
	}
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
		// with Origin or Sec-Fetch-Site. A bare POST (curl) says neither;
		// the cookie of the page is needed besides.
		if r.Method == http.MethodPost && !sameOrigin(r, p.origin) {
			http.Error(w, "only the approval page itself can decide", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// opening trades a one-time link for the cookie of its page, once: the
// file that held the link is removed, and a second opening gets nothing.
func (p *localPage) opening(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	l, ok := p.links[countersign.HashSecret(r.PathValue("token"))]
	first := ok && !l.opened
	var secret string
	if first {
		secret = randomHex(32)
		l.opened, l.cookie = true, countersign.HashSecret(secret)
		os.Remove(l.file)
	}
	p.mu.Unlock()
	switch {
	case !ok:
		http.Error(w, "This confirmation does not exist or is over.", http.StatusNotFound)
	case !first:
		http.Error(w, "This confirmation was already opened, in another window or by another program. "+
			"It decides nothing here. If you did not open it, deny the call in that window, or stop the agent.", http.StatusGone)
	default:
		http.SetCookie(w, &http.Cookie{Name: pageCookie, Value: secret, Path: "/confirm/" + l.handle,
			HttpOnly: true, SameSite: http.SameSiteLaxMode})
		http.Redirect(w, r, "/confirm/"+l.handle, http.StatusSeeOther)
	}
}

// request finds the request of a page, for the browser that opened it.
func (p *localPage) request(r *http.Request) (*countersign.Request, error) {
	c, err := r.Cookie(pageCookie)
	p.mu.Lock()
	l, ok := p.pages[r.PathValue("handle")]
	ok = ok && err == nil && l.opened && subtle.ConstantTimeCompare([]byte(l.cookie), []byte(countersign.HashSecret(c.Value))) == 1
	p.mu.Unlock()
	if !ok {
		return nil, countersign.Errorf(countersign.ENOTFOUND, "no such confirmation")
	}
	return p.svc.Get(r.Context(), p.agent, l.id)
}

func (p *localPage) render(w http.ResponseWriter, req *countersign.Request, done string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = p.templates.Confirm(w, web.LocalConfirm{Ref: countersign.FormatReference(req.Reference), Status: string(req.Status),
		Preview: req.Preview, Expires: req.ExpiresAt.Local().Format("15:04:05"), Done: done,
		Pending: req.Status == countersign.StatusPending})
}

func (p *localPage) show(w http.ResponseWriter, r *http.Request) {
	req, err := p.request(r)
	if err != nil {
		http.Error(w, "This confirmation does not exist or is over, or was opened in another browser.", http.StatusNotFound)
		return
	}
	p.render(w, req, "This request is "+string(req.Status)+". You can close this page.")
}

func (p *localPage) decide(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 1024)
	req, err := p.request(r)
	if err != nil {
		http.Error(w, "This confirmation does not exist or is over, or was opened in another browser.", http.StatusNotFound)
		return
	}
	d := countersign.Decision(r.PostFormValue("decision"))
	if d != countersign.DecisionApprove && d != countersign.DecisionDeny {
		http.Error(w, "decision must be approve or deny", http.StatusBadRequest)
		return
	}
	ap := countersign.ApproverPrincipal{Username: "local-page", AccountID: p.agent.AccountID, Role: countersign.RoleApprover}
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
