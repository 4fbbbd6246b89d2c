package server

import (
	"math"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/countersign/countersign"
)

// signinLimiter allows 5 sign-in attempts a minute and 20 an hour per
// client address (ADR 0007). It is per process; with several replicas an
// address gets that many per replica.
type signinLimiter struct {
	mu      sync.Mutex
	clients map[string]*signinBuckets
	swept   time.Time
}

type signinBuckets struct {
	minute, hour *rate.Limiter
	seen         time.Time
}

func newSigninLimiter() *signinLimiter {
	return &signinLimiter{clients: make(map[string]*signinBuckets)}
}

// allow takes one attempt for addr, or says how long until one is free.
func (l *signinLimiter) allow(addr string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > time.Hour {
		for k, b := range l.clients {
			if now.Sub(b.seen) > time.Hour {
				delete(l.clients, k)
			}
		}
		l.swept = now
	}
	b := l.clients[addr]
	if b == nil {
		b = &signinBuckets{
			minute: rate.NewLimiter(rate.Every(time.Minute/5), 5),
			hour:   rate.NewLimiter(rate.Every(time.Hour/20), 20),
		}
		l.clients[addr] = b
	}
	b.seen = now
	m, h := b.minute.ReserveN(now, 1), b.hour.ReserveN(now, 1)
	wait := max(m.DelayFrom(now), h.DelayFrom(now))
	if wait > 0 {
		m.CancelAt(now)
		h.CancelAt(now)
		return false, wait
	}
	return true, 0
}

func retryAfter(d time.Duration) string {
	return strconv.Itoa(int(math.Ceil(d.Seconds())))
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// signinPage is the data of the sign-in page.
type signinPage struct {
	pageBase
	Next     string
	Username string
	Error    string
}

func (s *Server) signinForm(w http.ResponseWriter, r *http.Request) error {
	b, err := s.browserOf(r.Context(), r)
	if err != nil {
		return err
	}
	next := safeNext(r.URL.Query().Get("next"))
	if b != nil {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return nil
	}
	return s.render(w, http.StatusOK, "signin", signinPage{Next: next})
}

func (s *Server) signin(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	addr := s.clientAddr(r)
	next := safeNext(r.PostFormValue("next"))
	username := r.PostFormValue("username")
	if ok, wait := s.signins.allow(addr, time.Now()); !ok {
		w.Header().Set("Retry-After", retryAfter(wait))
		return s.render(w, http.StatusTooManyRequests, "signin", signinPage{Next: next, Username: username,
			Error: "Too many sign-in attempts from your address. Try again in " + humanWait(wait) + "."})
	}
	id, sess, err := s.sessions.SignIn(r.Context(), username, r.PostFormValue("password"), addr, r.UserAgent())
	if code := countersign.ErrorCode(err); code == countersign.EUNAUTHORIZED || code == countersign.EFORBIDDEN {
		s.log.Info("sign-in refused", "client", addr)
		return s.render(w, http.StatusUnauthorized, "signin", signinPage{Next: next, Username: username, Error: countersign.ErrorMessage(err)})
	} else if err != nil {
		return err
	}
	// A new id at every sign-in: an old cookie, fixed by someone else,
	// never becomes a signed-in session.
	s.setSessionCookie(w, id, sess.ExpiresAt)
	s.log.Info("signed in", "approver", username, "client", addr)
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

func humanWait(d time.Duration) string {
	if d < time.Minute {
		return strconv.Itoa(int(math.Ceil(d.Seconds()))) + " seconds"
	}
	return strconv.Itoa(int(math.Ceil(d.Minutes()))) + " minutes"
}

func (s *Server) signout(w http.ResponseWriter, r *http.Request, b *browser) error {
	if err := s.sessions.SignOut(r.Context(), b.id); err != nil {
		return err
	}
	s.clearSessionCookie(w)
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
	return nil
}

// sessionsPage is the data of the page that lists one's sessions.
type sessionsPage struct {
	pageBase
	Sessions []sessionView
}

type sessionView struct {
	*countersign.Session
	Current bool
}

func (s *Server) sessionList(w http.ResponseWriter, r *http.Request, b *browser) error {
	base, err := s.base(r.Context(), b)
	if err != nil {
		return err
	}
	list, err := s.cfg.Store.Sessions(r.Context(), b.approver.ApproverID, time.Now())
	if err != nil {
		return err
	}
	p := sessionsPage{pageBase: base}
	for _, sess := range list {
		p.Sessions = append(p.Sessions, sessionView{Session: sess, Current: sess.Hash == b.session.Hash})
	}
	return s.render(w, http.StatusOK, "sessions", p)
}

func (s *Server) signoutEverywhere(w http.ResponseWriter, r *http.Request, b *browser) error {
	n, err := s.cfg.Store.DeleteSessions(r.Context(), b.approver.ApproverID)
	if err != nil {
		return err
	}
	s.log.Info("signed out everywhere", "approver", b.approver.Username, "sessions", n)
	s.clearSessionCookie(w)
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
	return nil
}

func (s *Server) switchAccount(w http.ResponseWriter, r *http.Request, b *browser) error {
	err := s.cfg.Store.SwitchSessionAccount(r.Context(), b.session.Hash, r.PostFormValue("account"))
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		// Not "no such request", which the error page says for ENOTFOUND.
		return countersign.Errorf(countersign.EFORBIDDEN, "You are not a member of that account.")
	} else if err != nil {
		return err
	}
	http.Redirect(w, r, "/approvals", http.StatusSeeOther)
	return nil
}
