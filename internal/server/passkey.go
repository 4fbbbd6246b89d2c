package server

import (
	"encoding/json"
	"net/http"
	"net/url"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
)

// maxAssertion bounds the browser's answer to a ceremony: a WebAuthn
// response with attestation "none" is well under 4 KiB.
const maxAssertion = 16 << 10

// ceremonyLimiter bounds the ceremonies one client address may begin: each
// writes a row that lives for minutes. It is its own limiter, not the
// password sign-in's, so that a password flood never uses up passkeys'
// turns.
type ceremonyLimiter struct {
	mu      sync.Mutex
	clients map[string]*rate.Limiter
	swept   time.Time
}

func newCeremonyLimiter() *ceremonyLimiter {
	return &ceremonyLimiter{clients: make(map[string]*rate.Limiter)}
}

func (l *ceremonyLimiter) allow(addr string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > 10*time.Minute {
		for k, lim := range l.clients {
			if lim.TokensAt(now) >= 30 {
				delete(l.clients, k)
			}
		}
		l.swept = now
	}
	lim := l.clients[addr]
	if lim == nil {
		lim = rate.NewLimiter(rate.Every(2*time.Second), 30)
		l.clients[addr] = lim
	}
	return lim.AllowN(now, 1)
}

// ceremonyStart is what a begin route answers: the handle the form sends
// back, and the options for navigator.credentials.
type ceremonyStart struct {
	Handle  string          `json:"handle"`
	Options json.RawMessage `json:"options"`
}

// jsonPage wraps a page route that answers a script with JSON: errors too
// are JSON ({"error":{"code","message"}}), so the page can say why.
func (s *Server) jsonPage(h pageHandler) pageHandler {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := h(w, r); err != nil {
			s.writeAPIError(w, r, err)
		}
		return nil
	}
}

// beginCeremony checks the limit of the address and that passkeys are on.
func (s *Server) beginCeremony(r *http.Request) error {
	if s.passkeys == nil {
		return errNoPasskeys()
	}
	if !s.ceremonies.allow(s.clientAddr(r), time.Now()) {
		return &countersign.Error{Code: countersign.ELIMIT, Message: "Too many passkey prompts from your address. Wait a minute.", RetryAfter: time.Minute}
	}
	return nil
}

func errNoPasskeys() error {
	return countersign.Errorf(countersign.EUNAVAILABLE, "Passkeys are off on this server: its public URL (COUNTERSIGN_PUBLIC_URL) must name a host, not an IP address.")
}

// ceremonyAnswer reads the form fields a ceremony's page sends back.
func ceremonyAnswer(r *http.Request) (handle string, response []byte, err error) {
	handle, resp := r.PostFormValue("webauthn_handle"), r.PostFormValue("webauthn_response")
	if handle == "" || resp == "" {
		return "", nil, countersign.Errorf(countersign.EINVALID, "The passkey's answer is missing: this needs the page's script, and a browser with passkeys.")
	}
	if len(resp) > maxAssertion {
		return "", nil, countersign.Errorf(countersign.EINVALID, "The passkey's answer is too large.")
	}
	return handle, []byte(resp), nil
}

// passkeysPage is the data of the page that lists one's passkeys.
type passkeysPage struct {
	pageBase
	Passkeys         []*countersign.Passkey
	Available        bool
	PasswordDisabled bool
	Error, Notice    string
	// Next is the page the browser returns to once a passkey is added
	// (the request page that asked for one), "" for none.
	Next string
}

// passkeyList shows one's passkeys. After a change the browser is sent
// here (post, redirect, get): ?added=ID or ?removed=1 says what changed,
// so that a reload submits nothing again.
func (s *Server) passkeyList(w http.ResponseWriter, r *http.Request, b *browser) error {
	notice := ""
	if r.URL.Query().Get("removed") != "" {
		notice = "Passkey removed."
	}
	if id := r.URL.Query().Get("added"); id != "" {
		list, err := s.cfg.Store.Passkeys(r.Context(), b.approver.ApproverID)
		if err != nil {
			return err
		}
		for _, pk := range list { // only one's own passkeys are named
			if pk.ID == id {
				notice = "Passkey " + pk.Name + " added."
			}
		}
	}
	return s.renderPasskeys(w, r, b, http.StatusOK, "", notice)
}

// passkeyNext is the page a passkeys form returns to, "" when none or not
// one of the server's own pages.
func passkeyNext(r *http.Request) string {
	next := r.URL.Query().Get("next")
	if r.Method == http.MethodPost {
		next = r.PostFormValue("next")
	}
	p, _ := safeReturn(next)
	return p
}

func (s *Server) renderPasskeys(w http.ResponseWriter, r *http.Request, b *browser, status int, msg, notice string) error {
	base, err := s.base(r.Context(), b)
	if err != nil {
		return err
	}
	list, err := s.cfg.Store.Passkeys(r.Context(), b.approver.ApproverID)
	if err != nil {
		return err
	}
	ap, err := s.cfg.Store.ApproverByID(r.Context(), b.approver.ApproverID)
	if err != nil {
		return err
	}
	return s.render(w, status, "passkeys", passkeysPage{pageBase: base, Passkeys: list, Available: s.passkeys != nil,
		PasswordDisabled: ap.PasswordHash == "", Error: msg, Notice: notice, Next: passkeyNext(r)})
}

// beginRegistration starts adding a passkey for the signed-in approver.
func (s *Server) beginRegistration(w http.ResponseWriter, r *http.Request, b *browser) error {
	if err := s.beginCeremony(r); err != nil {
		return err
	}
	if err := s.confirmPassword(r, b); err != nil {
		return err
	}
	handle, options, err := s.passkeys.BeginRegistration(r.Context(), b.approver.ApproverID, r.PostFormValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ceremonyStart{Handle: handle, Options: options})
	return nil
}

// confirmPassword asks the approver's password again before a passkey is
// added. A session cookie proves a browser signed in, not that a human is
// at it: an agent driving the browser could add a passkey of its own (a
// virtual authenticator) and answer every step-up with it. A passkey-only
// approver has no password to type: another passkey comes through an
// enrolment link of the CLI.
func (s *Server) confirmPassword(r *http.Request, b *browser) error {
	ap, err := s.cfg.Store.ApproverByID(r.Context(), b.approver.ApproverID)
	if err != nil {
		return err
	}
	if ap.PasswordHash == "" {
		return countersign.Errorf(countersign.EFORBIDDEN, "You sign in with passkeys only, so another passkey is added with a one-time link: run countersign approver enrol --username %s on the server.", ap.Username)
	}
	return s.passwordAgain(r, ap, "add a passkey")
}

// passwordAgain checks the password a signed-in approver's form carries,
// before something a session cookie alone must not do (to add a passkey,
// to allow a connection: what says which). The check counts against the
// sign-in limits of the address and the username, as a sign-in does, so
// an agent at the browser guesses no faster than at the sign-in form.
func (s *Server) passwordAgain(r *http.Request, ap *countersign.Approver, what string) error {
	ticket, err := s.signins.admit(s.clientAddr(r), ap.Username, "", s.cfg.Clock.Now())
	if err != nil {
		return err
	}
	ok, err := identity.CheckPasswordTurn(r.Context(), ap.PasswordHash, r.PostFormValue("password"),
		identity.PasswordTurn{Slots: s.sessions.Slots, Wait: s.sessions.SlotWait})
	s.signins.settle(ticket, err == nil && !ok, err == nil)
	if err != nil {
		return err
	}
	if !ok {
		s.log.Info("password confirmation refused: wrong password", "to", what, "approver", ap.Username, "client", s.clientAddr(r))
		return countersign.Errorf(countersign.EUNAUTHORIZED, "Wrong password. Type the password you sign in with to %s.", what)
	}
	return nil
}

// finishRegistration stores the passkey the browser made.
func (s *Server) finishRegistration(w http.ResponseWriter, r *http.Request, b *browser) error {
	if s.passkeys == nil {
		return errNoPasskeys()
	}
	handle, resp, err := ceremonyAnswer(r)
	if err == nil {
		var pk *countersign.Passkey
		pk, err = s.passkeys.FinishRegistration(r.Context(), b.approver.ApproverID, handle, resp)
		if err == nil {
			s.log.Info("passkey added", "approver", b.approver.Username, "passkey", pk.ID)
			// Post, redirect, get: back to the page that asked for a
			// passkey, or to the list that names the new one.
			to := "/passkeys?added=" + url.QueryEscape(pk.ID)
			if next := passkeyNext(r); next != "" {
				to = next
			}
			http.Redirect(w, r, to, http.StatusSeeOther)
			return nil
		}
	}
	if code := countersign.ErrorCode(err); code == countersign.EINVALID || code == countersign.ECONFLICT {
		return s.renderPasskeys(w, r, b, http.StatusBadRequest, countersign.ErrorMessage(err), "")
	}
	return err
}

// removePasskey removes one of the approver's passkeys. The last passkey
// of a passkey-only approver stays: removing it would lock the approver
// out, which only the CLI on the server may do. The store checks that in
// the statement that removes, so that removals at once cannot take the
// last two.
func (s *Server) removePasskey(w http.ResponseWriter, r *http.Request, b *browser) error {
	err := s.cfg.Store.RemovePasskey(r.Context(), b.approver.ApproverID, r.PathValue("id"), true)
	switch countersign.ErrorCode(err) {
	case "":
	case countersign.ENOTFOUND:
		return s.renderPasskeys(w, r, b, http.StatusNotFound, "You have no such passkey.", "")
	case countersign.ECONFLICT:
		return s.renderPasskeys(w, r, b, http.StatusConflict,
			"This is your only passkey and you have no password: removing it would lock you out. Add another passkey first.", "")
	default:
		return err
	}
	s.log.Info("passkey removed", "approver", b.approver.Username, "passkey", r.PathValue("id"))
	http.Redirect(w, r, "/passkeys?removed=1", http.StatusSeeOther)
	return nil
}

// beginPasskeySignIn starts a sign-in with a passkey: no username, no
// session, and no argon2id.
func (s *Server) beginPasskeySignIn(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := s.beginCeremony(r); err != nil {
		return err
	}
	handle, options, err := s.passkeys.BeginSignIn(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ceremonyStart{Handle: handle, Options: options})
	return nil
}

// passkeySignIn checks the assertion and signs the browser in.
func (s *Server) passkeySignIn(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxAssertion+8<<10)
	next := safeNext(r.PostFormValue("next"))
	if s.passkeys == nil {
		return s.render(w, http.StatusServiceUnavailable, "signin", signinPage{Next: next, Error: countersign.ErrorMessage(errNoPasskeys())})
	}
	addr := s.clientAddr(r)
	handle, resp, err := ceremonyAnswer(r)
	var id string
	var sess *countersign.Session
	var pk *countersign.Passkey
	if err == nil {
		id, sess, pk, err = s.passkeys.FinishSignIn(r.Context(), handle, resp, addr, r.UserAgent())
	}
	switch code := countersign.ErrorCode(err); code {
	case "":
	case countersign.EINVALID, countersign.EUNAUTHORIZED, countersign.EFORBIDDEN:
		s.log.Info("passkey sign-in refused", "client", addr)
		status := http.StatusUnauthorized
		if code == countersign.EINVALID {
			status = http.StatusBadRequest
		}
		return s.render(w, status, "signin", signinPage{Next: next, Error: countersign.ErrorMessage(err), Connect: s.connectOf(r, next)})
	default:
		return err
	}
	s.setSessionCookie(w, id, sess.ExpiresAt)
	s.log.Info("signed in with a passkey", "approver_id", sess.ApproverID, "passkey", pk.ID, "client", addr)
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

// passkeyRoutes lists the routes of passkeys: the page of one's passkeys
// and its ceremonies, the sign-in with a passkey, the step-up of a
// decision and the CLI's enrolment links. The begin routes answer the
// page's script with JSON; the finish routes are the forms it submits.
func (s *Server) passkeyRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /passkeys", s.page(s.signedIn(s.passkeyList)))
	mux.HandleFunc("POST /passkeys/register/begin", s.page(s.jsonPage(s.signedIn(s.beginRegistration))))
	mux.HandleFunc("POST /passkeys/register", s.page(s.signedIn(s.finishRegistration)))
	mux.HandleFunc("POST /passkeys/{id}/remove", s.page(s.signedIn(s.removePasskey)))
	mux.HandleFunc("POST /signin/passkey/begin", s.page(s.jsonPage(s.beginPasskeySignIn)))
	mux.HandleFunc("POST /signin/passkey", s.page(s.passkeySignIn))
	mux.HandleFunc("POST /approvals/{id}/stepup", s.page(s.jsonPage(s.signedIn(s.beginStepUp))))
	mux.HandleFunc("GET /enrol/{token}", s.page(s.enrolForm))
	mux.HandleFunc("POST /enrol/{token}/begin", s.page(s.jsonPage(s.beginEnrolment)))
	mux.HandleFunc("POST /enrol/{token}", s.page(s.finishEnrolment))
}
