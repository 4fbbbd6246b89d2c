package server

import (
	"crypto/sha256"
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
)

// The sign-in limits (ADR 0007, OWASP's "device cookies"). They are per
// process: with several replicas a client gets that many per replica.
var (
	// Every attempt of a browser that is not known for the username, per
	// client address (IPv6 per /64).
	addrWindows = []window{{5, time.Minute}, {20, time.Hour}}
	// Failed attempts (and those in progress) of browsers not known for
	// the username, per username, from all addresses together: a guesser
	// with many addresses gets at most 50 guesses a day at one account,
	// while a person mistyping on a new phone and a laptop stays well
	// under 10 in a quarter of an hour. A flood can keep unknown browsers
	// of that username out; the approver's known browsers are not counted
	// here and stay in.
	userWindows = []window{{10, 15 * time.Minute}, {50, 24 * time.Hour}}
	// Failed attempts (and those in progress) of a known browser, per
	// device cookie: as many as an address gets. Past them the browser
	// counts as unknown again, so a stolen device cookie gives a guesser
	// no more than this.
	deviceWindows = addrWindows
	// Every attempt of known browsers, per username, from all of them
	// together, a right password too: what goes ahead of unknown browsers
	// is bounded by the approvers there are, not by how many device
	// cookies one approver collects or how often a known browser signs in
	// with its own password.
	knownUserWindows = addrWindows
)

// signinKeys bounds each log's keys: a few MiB of memory at most. See
// slidingLog for what happens when a log is full.
const signinKeys = 20000

// signinLimiter holds the sign-in limits.
type signinLimiter struct {
	mu      sync.Mutex
	addrs   *slidingLog
	users   *slidingLog
	devices *slidingLog
	known   *slidingLog // knownUserWindows, by username
}

func newSigninLimiter() *signinLimiter {
	return &signinLimiter{
		addrs:   newSlidingLog(signinKeys, addrWindows...),
		users:   newSlidingLog(signinKeys, userWindows...),
		devices: newSlidingLog(signinKeys, deviceWindows...),
		known:   newSlidingLog(signinKeys, knownUserWindows...),
	}
}

// signinTicket is one admitted attempt, to be settled when its outcome is
// known.
type signinTicket struct {
	at        time.Time
	user      string // the key in users, or ""
	device    string // the key in devices, or ""
	knownUser string // the key in known, or ""
}

// known says the attempt was admitted as a known browser's.
func (t signinTicket) known() bool { return t.device != "" }

// admit lets an attempt for username from addr through, or says how long
// until it would be let through and why not. device is the id of the
// browser's device cookie when the cookie is the username's approver's,
// else "".
func (l *signinLimiter) admit(addr, username, device string, now time.Time) (signinTicket, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	user := userKey(username)
	if device != "" {
		dw, dfull := l.devices.check(device, now)
		kw, kfull := l.known.check(user, now)
		if dw == 0 && kw == 0 && !dfull && !kfull {
			l.devices.add(device, now)
			l.known.add(user, now)
			return signinTicket{at: now, device: device, knownUser: user}, nil
		}
		// Too many failures from this browser, or attempts of the
		// username's known browsers: it is unknown again.
	}
	aw, afull := l.addrs.check(addr, now)
	uw, ufull := l.users.check(user, now)
	switch {
	case afull || ufull:
		return signinTicket{}, limited(time.Minute, "Too many sign-in attempts at the moment. Try again in a minute.")
	case aw > 0:
		return signinTicket{}, limited(aw, "Too many sign-in attempts from your address. Try again in "+humanWait(aw)+".")
	case uw > 0:
		return signinTicket{}, limited(uw, "Too many failed sign-ins for this username. Try again in "+humanWait(uw)+
			", or from a browser that has signed in as it before.")
	}
	l.addrs.add(addr, now)
	l.users.add(user, now)
	return signinTicket{at: now, user: user}, nil
}

// settle records how an admitted attempt ended. Only failures stay
// counted per username and per device; an attempt whose password was
// never checked (the server was busy) is no failure either, and is not
// counted among the known browsers' attempts, which a right password is.
func (l *signinLimiter) settle(t signinTicket, failed, checked bool) {
	if failed {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.knownUser != "" && !checked {
		l.known.remove(t.knownUser, t.at)
	}
	if t.user != "" {
		l.users.remove(t.user, t.at)
	}
	if t.device != "" {
		l.devices.remove(t.device, t.at)
	}
}

func limited(wait time.Duration, msg string) error {
	return &countersign.Error{Code: countersign.ELIMIT, Message: msg, RetryAfter: wait}
}

// userKey is the key of a username in the limits: a hash, so that a long
// made-up name costs no more memory than a short one.
func userKey(username string) string {
	h := sha256.Sum256([]byte(username))
	return string(h[:16])
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
	// Connect says who asks to connect, when the sign-in leads to the
	// consent page of a connection.
	Connect *connectView
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
	return s.render(w, http.StatusOK, "signin", signinPage{Next: next, Connect: s.connectOf(r, next)})
}

func (s *Server) signin(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	ctx, now := r.Context(), s.cfg.Clock.Now()
	addr := s.clientAddr(r)
	next := safeNext(r.PostFormValue("next"))
	username := r.PostFormValue("username")
	refuse := func(status int, err error) error {
		var e *countersign.Error
		if errors.As(err, &e) && e.RetryAfter > 0 {
			w.Header().Set("Retry-After", retryAfter(e.RetryAfter))
		}
		return s.render(w, status, "signin", signinPage{Next: next, Username: username, Error: countersign.ErrorMessage(err), Connect: s.connectOf(r, next)})
	}
	// A device cookie counts only for the approver it names.
	dev, known := s.deviceOf(r, now), ""
	if dev != nil {
		ok, err := s.sessions.KnownDevice(ctx, username, dev.approver)
		if err != nil {
			return err
		}
		if ok {
			known = dev.id
		}
	}
	ticket, err := s.signins.admit(addr, username, known, now)
	if err != nil {
		return refuse(http.StatusTooManyRequests, err)
	}
	id, sess, err := s.sessions.SignInPassword(ctx, identity.PasswordSignIn{
		Username: username, Password: r.PostFormValue("password"), Client: addr, UserAgent: r.UserAgent(), Known: ticket.known(),
	})
	code := countersign.ErrorCode(err)
	s.signins.settle(ticket, code == countersign.EUNAUTHORIZED || code == countersign.EFORBIDDEN, code != countersign.ELIMIT)
	switch code {
	case "":
	case countersign.EUNAUTHORIZED, countersign.EFORBIDDEN:
		s.log.Info("sign-in refused", "client", addr, "known_device", ticket.known())
		return refuse(http.StatusUnauthorized, err)
	case countersign.ELIMIT:
		s.log.Info("sign-in refused: every password check slot stayed busy", "client", addr, "known_device", ticket.known())
		return refuse(http.StatusTooManyRequests, err)
	default:
		return err
	}
	// A new id at every sign-in: an old cookie, fixed by someone else,
	// never becomes a signed-in session.
	s.setSessionCookie(w, id, sess.ExpiresAt)
	s.setDeviceCookie(w, dev, sess.ApproverID, now)
	s.log.Info("signed in", "approver", username, "client", addr, "known_device", ticket.known())
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
	list, err := s.cfg.Store.Sessions(r.Context(), b.approver.ApproverID, s.cfg.Clock.Now())
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
