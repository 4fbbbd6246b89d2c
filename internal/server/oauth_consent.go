package server

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
)

// authzRequest is an authorization request (RFC 6749 §4.1.1, OAuth 2.1,
// PKCE, RFC 8707) whose client and redirect URI have been checked.
type authzRequest struct {
	Client      *countersign.OAuthClient
	RedirectURI string
	State       string
	Challenge   string
	Resource    string
	Scope       []string // the tiers asked for; none: the client did not say
}

// authzParams are the parameters of an authorization request, which the
// consent form carries through.
var authzParams = []string{"response_type", "client_id", "redirect_uri", "state", "code_challenge", "code_challenge_method", "resource", "scope"}

// authzError is a fault of an authorization request whose client and
// redirect URI are known: RFC 6749 would send it back to the client.
type authzError struct {
	code, desc string
}

// page is the error page that shows the fault instead. Until an approver
// has signed in and seen the consent page, the browser goes nowhere the
// client named: anyone may register a client whose redirect URI is a
// phishing page, and an error redirect would make this server an open
// redirector to it (RFC 9700 §4.11.2).
func (e *authzError) page() error {
	return countersign.Errorf(countersign.EINVALID,
		"The application's authorization request cannot be used (%s: %s). Nothing was sent back to it: return to the application and connect again.", e.code, e.desc)
}

// parseAuthz checks an authorization request. An unknown client or a
// redirect URI that is not exactly one the client registered is an error
// page; every other fault is an authzError, which is shown as a page too.
func (s *Server) parseAuthz(r *http.Request, q url.Values) (*authzRequest, *authzError, error) {
	for _, k := range authzParams {
		if len(q[k]) > 1 {
			// Which of two redirect_uris or states would be the real one?
			return nil, nil, countersign.Errorf(countersign.EINVALID, "The authorization request repeats the parameter %q.", k)
		}
	}
	c, err := s.oauth.Client(r.Context(), q.Get("client_id"))
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		return nil, nil, countersign.Errorf(countersign.EINVALID, "The application that sent you here is not registered with this server (unknown client_id). Go back and connect it again.")
	} else if err != nil {
		return nil, nil, err
	}
	redirect := q.Get("redirect_uri")
	if !slices.Contains(c.RedirectURIs, redirect) {
		return nil, nil, countersign.Errorf(countersign.EINVALID, "The application asked to return to an address it did not register (redirect_uri), so this server will not send you there.")
	}
	a := &authzRequest{Client: c, RedirectURI: redirect, State: q.Get("state"), Challenge: q.Get("code_challenge"), Resource: q.Get("resource")}
	switch {
	case q.Get("response_type") != "code":
		return a, &authzError{"unsupported_response_type", "response_type must be code"}, nil
	case a.State == "" || len(a.State) > 500:
		return a, &authzError{"invalid_request", "state is required (at most 500 characters)"}, nil
	case q.Get("code_challenge_method") != "S256" || !identity.ValidChallenge(a.Challenge):
		return a, &authzError{"invalid_request", "PKCE is required: code_challenge with code_challenge_method S256"}, nil
	case a.Resource == "":
		return a, &authzError{"invalid_target", "the resource parameter (RFC 8707) is required: " + s.oauth.Resource}, nil
	case !s.oauth.CheckResource(a.Resource):
		return a, &authzError{"invalid_target", "this server issues tokens only for " + s.oauth.Resource}, nil
	}
	scope, err := identity.ParseScope(q.Get("scope"))
	if err != nil {
		return a, &authzError{"invalid_scope", "scope may name only read, write, commit and external"}, nil
	}
	a.Scope = scope
	return a, nil, nil
}

// redirectBack sends the browser to the client's redirect URI with params
// and the issuer (RFC 9207).
func (s *Server) redirectBack(w http.ResponseWriter, r *http.Request, a *authzRequest, params url.Values) {
	u, _ := url.Parse(a.RedirectURI) // registered, so valid
	q := u.Query()
	for k, v := range params {
		q[k] = v
	}
	if a.State != "" {
		q.Set("state", a.State)
	}
	q.Set("iss", s.issuer())
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

// consentPage is the data of the consent page.
type consentPage struct {
	pageBase
	ClientName   string
	RedirectHost string
	Server       string   // this server's host, which the client connects to
	Asked        []string // the tiers the client asked for (its scope); none: it did not say
	Params       []param  // the request, carried through the form
	Tiers        []tierChoice
	Error        string
	// Password and Passkey say how the approver can prove the consent:
	// by typing the password again, or with a passkey.
	Password, Passkey bool
}

type param struct{ Name, Value string }

type tierChoice struct {
	Name, Help string
	Checked    bool
}

var tierHelp = map[string]string{
	"read":     "read-only tools",
	"write":    "tools that change something that can be undone",
	"commit":   "tools that change something for good; each call still needs your approval",
	"external": "tools that reach the outside world; each call still needs your approval",
}

// authorize shows the consent page: after the checks of parseAuthz, and
// with a signed-in browser (the sign-in form comes back here). A fault of
// the request is an error page, signed in or not: nothing redirects to the
// client before the approver has seen the consent page.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) error {
	a, aerr, err := s.parseAuthz(r, r.URL.Query())
	if err != nil {
		return err
	}
	if aerr != nil {
		return aerr.page()
	}
	b, err := s.browserOf(r.Context(), r)
	if err != nil {
		return err
	}
	if b == nil {
		http.Redirect(w, r, "/signin?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return nil
	}
	return s.renderConsent(w, r, b, a, "", http.StatusOK)
}

func (s *Server) renderConsent(w http.ResponseWriter, r *http.Request, b *browser, a *authzRequest, msg string, status int) error {
	base, err := s.base(r.Context(), b)
	if err != nil {
		return err
	}
	u, _ := url.Parse(a.RedirectURI)
	p := consentPage{pageBase: base, ClientName: a.Client.Name, RedirectHost: u.Host, Server: s.cfg.PublicURL.Host, Asked: a.Scope, Error: msg}
	if p.Password, p.Passkey, err = s.proofsOf(r.Context(), b); err != nil {
		return err
	}
	for _, k := range authzParams {
		if v := r.FormValue(k); v != "" {
			p.Params = append(p.Params, param{k, v})
		}
	}
	for _, t := range identity.GrantTiers {
		checked := slices.Contains(a.Scope, t)
		switch {
		case r.Method == http.MethodPost:
			checked = slices.Contains(r.PostForm["tier"], t) // the page again: as the approver left it
		case len(a.Scope) == 0:
			checked = t == "read" || t == "write"
		}
		p.Tiers = append(p.Tiers, tierChoice{Name: t, Help: tierHelp[t], Checked: checked})
	}
	// The form posts here and the answer redirects to the client: a
	// browser holds a redirect after a form to form-action too, so the
	// client's origin is allowed, and nothing else.
	w.Header().Set("Content-Security-Policy", strings.Replace(pageCSP, "form-action 'self'", "form-action 'self' "+u.Scheme+"://"+u.Host, 1))
	return s.render(w, status, "consent", p)
}

// consent takes the approver's decision. The page wrapper has checked the
// Host and the Origin, signedIn the session and the CSRF token. Only the
// decision goes back to the client: the consent page was shown for a
// request without faults, so a form with one did not come from it.
func (s *Server) consent(w http.ResponseWriter, r *http.Request, b *browser) error {
	a, aerr, err := s.parseAuthz(r, r.PostForm)
	if err != nil {
		return err
	}
	if aerr != nil {
		return aerr.page()
	}
	if r.PostFormValue("decision") != "allow" {
		s.log.Info("oauth consent refused", "client_id", a.Client.ID, "approver", b.approver.Username)
		s.redirectBack(w, r, a, url.Values{"error": {"access_denied"}, "error_description": {"the approver refused the request"}})
		return nil
	}
	in := s.allowInput(r, b, a)
	if err := s.oauth.CheckAllow(r.Context(), in); countersign.ErrorCode(err) == countersign.EINVALID {
		return s.renderConsent(w, r, b, a, countersign.ErrorMessage(err), http.StatusBadRequest)
	} else if err != nil {
		return err
	}
	in.Proof, err = s.consentProof(r, b, in)
	if err != nil {
		return s.refuseConsent(w, r, b, a, err)
	}
	code, sessionID, g, err := s.oauth.Allow(r.Context(), in)
	if errors.Is(err, countersign.ErrClientGone) {
		// Never used, the client expired or made room for another while
		// the page was open: the application must register again.
		s.log.Info("oauth consent for a client gone", "client_id", a.Client.ID, "approver", b.approver.Username)
		return countersign.Errorf(countersign.EINVALID, "The application that sent you here is no longer registered with this server: its registration expired before you allowed it. Nothing was allowed. Go back and connect it again.")
	} else if countersign.ErrorCode(err) == countersign.EINVALID {
		return s.renderConsent(w, r, b, a, countersign.ErrorMessage(err), http.StatusBadRequest)
	} else if err != nil {
		return err
	}
	// ADR 0007: the browser that completed the consent is signed in for
	// that account, with a session that ends with the grant. It replaces
	// the session this browser had, so that a new id is issued here too.
	if err := s.sessions.SignOut(r.Context(), b.id); err != nil {
		return err
	}
	s.setSessionCookie(w, sessionID, s.sessions.Clock.Now().Add(identity.SessionTTL))
	s.log.Info("oauth grant allowed", "grant", g.ID, "client_id", a.Client.ID, "approver", b.approver.Username, "tiers", strings.Join(g.Tiers, ","),
		"proof", in.Proof.Method)
	s.redirectBack(w, r, a, url.Values{"code": {code}})
	return nil
}

// connectView is what the sign-in page says of the connection it leads
// to: the client that asks (by the name it gave itself), the server it
// asks to connect to, and where the browser returns after.
type connectView struct {
	Client, Server, Return string
}

// connectOf is the connection a sign-in's next leads to, nil when next is
// no authorization request of a registered client with one of its
// redirect URIs.
func (s *Server) connectOf(r *http.Request, next string) *connectView {
	u, err := url.Parse(next)
	if err != nil || u.Path != "/oauth/authorize" || s.oauth == nil {
		return nil
	}
	q := u.Query()
	c, err := s.oauth.Client(r.Context(), q.Get("client_id"))
	if err != nil || !slices.Contains(c.RedirectURIs, q.Get("redirect_uri")) {
		return nil
	}
	back, _ := url.Parse(q.Get("redirect_uri")) // registered, so valid
	return &connectView{Client: c.Name, Server: s.cfg.PublicURL.Host, Return: back.Host}
}
