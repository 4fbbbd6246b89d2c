package server

import (
	"context"
	"net/http"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
)

// cookieName is the session cookie's name: with https, the __Host- prefix
// pins it to this host, path / and Secure; plain http (a loopback test
// setup) can carry neither.
func (s *Server) cookieName() string {
	if s.secure() {
		return "__Host-countersign_session"
	}
	return "countersign_session"
}

func (s *Server) secure() bool { return s.cfg.PublicURL.Scheme == "https" }

// setSessionCookie hands the browser its session id: HttpOnly, SameSite=Lax
// (the click from a chat app into the inbox is a cross-site top-level GET),
// Secure under https, for the session's lifetime.
func (s *Server) setSessionCookie(w http.ResponseWriter, id string, expires time.Time) {
	http.SetCookie(w, &http.Cookie{
		Name: s.cookieName(), Value: id, Path: "/", Expires: expires, MaxAge: int(identity.SessionTTL.Seconds()),
		HttpOnly: true, Secure: s.secure(), SameSite: http.SameSiteLaxMode,
	})
}

func (s *Server) clearSessionCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{
		Name: s.cookieName(), Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: s.secure(), SameSite: http.SameSiteLaxMode,
	})
}

// browser is a signed-in browser: its session, the session's secret id
// (for the CSRF token) and the approver acting for the session's account.
type browser struct {
	id       string
	session  *countersign.Session
	approver countersign.ApproverPrincipal
}

// browserOf returns the signed-in browser of a request, or nil.
func (s *Server) browserOf(ctx context.Context, r *http.Request) (*browser, error) {
	c, err := r.Cookie(s.cookieName())
	if err != nil || c.Value == "" {
		return nil, nil
	}
	sess, ap, err := s.sessions.Session(ctx, c.Value)
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return &browser{id: c.Value, session: sess, approver: ap}, nil
}

// signedIn wraps a page that needs a session. Without one, a GET goes to
// the sign-in form with a way back, and a POST is refused. Every POST must
// carry the session's CSRF token.
func (s *Server) signedIn(h func(w http.ResponseWriter, r *http.Request, b *browser) error) pageHandler {
	return func(w http.ResponseWriter, r *http.Request) error {
		b, err := s.browserOf(r.Context(), r)
		if err != nil {
			return err
		}
		if b == nil {
			if r.Method != http.MethodGet {
				return countersign.Errorf(countersign.EUNAUTHORIZED, "Your session has ended. Sign in again and repeat what you did.")
			}
			http.Redirect(w, r, "/signin?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return nil
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
			if err := s.checkCSRF(r, b.id); err != nil {
				return err
			}
		}
		return h(w, r, b)
	}
}

// pageBase is what every page's layout needs.
type pageBase struct {
	SignedIn bool
	CSRF     string
	Username string
	Account  string
	Accounts []accountOption
	Live     string // non-empty: the page reloads when the account's requests change
	// Role is the approver's role in the account: a viewer's pages offer
	// no decision.
	Role countersign.Role
}

type accountOption struct {
	ID, Name string
	Current  bool
}

// base builds the layout's data for a signed-in browser.
func (s *Server) base(ctx context.Context, b *browser) (pageBase, error) {
	accounts, err := s.cfg.Store.MembershipAccounts(ctx, b.approver.ApproverID)
	if err != nil {
		return pageBase{}, err
	}
	p := pageBase{SignedIn: true, CSRF: s.csrfToken(b.id), Username: b.approver.Username, Role: b.approver.Role}
	for _, a := range accounts {
		cur := a.ID == b.session.AccountID
		if cur {
			p.Account = a.Name
		}
		p.Accounts = append(p.Accounts, accountOption{ID: a.ID, Name: a.Name, Current: cur})
	}
	return p, nil
}
