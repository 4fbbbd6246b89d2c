package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
)

// Allowing a connection needs a fresh proof of the approver, as adding a
// passkey does: a session cookie proves that a browser signed in, not that
// a human clicked, and an agent driving the browser could otherwise allow
// a client of its own more than its key may do. The consent form carries
// the password typed again (checked by passwordAgain, against the sign-in
// limits), or a passkey assertion of exactly this consent.

// allowInput reads what the consent form allows: the account (the
// session's when the form names none) and the tiers.
func (s *Server) allowInput(r *http.Request, b *browser, a *authzRequest) identity.AllowInput {
	account := r.PostFormValue("account")
	if account == "" {
		account = b.session.AccountID
	}
	return identity.AllowInput{
		Approver: b.approver, AccountID: account, Client: a.Client, RedirectURI: a.RedirectURI, Challenge: a.Challenge,
		Tiers: r.PostForm["tier"], UserAgent: r.UserAgent(), ClientAddr: s.clientAddr(r),
	}
}

// proofsOf says how the approver can prove a consent: with the password,
// with a passkey (when passkeys are on and the approver has one).
func (s *Server) proofsOf(ctx context.Context, b *browser) (password, passkey bool, err error) {
	ap, err := s.cfg.Store.ApproverByID(ctx, b.approver.ApproverID)
	if err != nil {
		return false, false, err
	}
	if s.passkeys != nil {
		list, err := s.cfg.Store.Passkeys(ctx, b.approver.ApproverID)
		if err != nil {
			return false, false, err
		}
		passkey = len(list) > 0
	}
	return ap.PasswordHash != "", passkey, nil
}

// errProofMissing refuses an Allow whose form carries neither a password
// nor a passkey's answer, before anything is counted.
var errProofMissing = countersign.Errorf(countersign.EUNAUTHORIZED,
	"Type your password (or confirm with your passkey) to allow the connection: it proves that you, not something driving this browser, allow it.")

// consentProof checks the proof the consent form carries: a passkey's
// answer when it has one, else the password.
func (s *Server) consentProof(r *http.Request, b *browser, in identity.AllowInput) (*identity.ConsentProof, error) {
	if r.PostFormValue("webauthn_response") != "" {
		if s.passkeys == nil {
			return nil, errNoPasskeys()
		}
		handle, resp, err := ceremonyAnswer(r)
		if err != nil {
			return nil, err
		}
		proof, err := s.passkeys.VerifyConsent(r.Context(), b.approver.ApproverID, in.Binding(), handle, resp)
		if err != nil {
			s.log.Info("oauth consent refused: passkey", "client_id", in.Client.ID, "approver", b.approver.Username, "client", s.clientAddr(r))
		}
		return proof, err
	}
	if r.PostFormValue("password") == "" {
		return nil, errProofMissing
	}
	ap, err := s.cfg.Store.ApproverByID(r.Context(), b.approver.ApproverID)
	if err != nil {
		return nil, err
	}
	if ap.PasswordHash == "" {
		return nil, countersign.Errorf(countersign.EFORBIDDEN, "You sign in with passkeys only: allow the connection with your passkey.")
	}
	if err := s.passwordAgain(r, ap, "allow the connection"); err != nil {
		return nil, err
	}
	return identity.PasswordProof(ap.ID), nil
}

// refuseConsent shows the consent page again with the reason a proof was
// refused: a wrong password, a limit, a passkey's failed answer.
func (s *Server) refuseConsent(w http.ResponseWriter, r *http.Request, b *browser, a *authzRequest, err error) error {
	status := map[string]int{countersign.EINVALID: http.StatusBadRequest, countersign.EUNAUTHORIZED: http.StatusUnauthorized,
		countersign.EFORBIDDEN: http.StatusForbidden, countersign.ELIMIT: http.StatusTooManyRequests}[countersign.ErrorCode(err)]
	if status == 0 {
		return err
	}
	var e *countersign.Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		w.Header().Set("Retry-After", retryAfter(e.RetryAfter))
	}
	return s.renderConsent(w, r, b, a, countersign.ErrorMessage(err), status)
}

// beginConsentPasskey starts the passkey assertion of the consent the form
// describes: its challenge is bound to the client, the redirect URI, the
// PKCE challenge, the account and the tiers chosen.
func (s *Server) beginConsentPasskey(w http.ResponseWriter, r *http.Request, b *browser) error {
	if err := s.beginCeremony(r); err != nil {
		return err
	}
	a, aerr, err := s.parseAuthz(r, r.PostForm)
	if err != nil {
		return err
	}
	if aerr != nil {
		return aerr.page()
	}
	in := s.allowInput(r, b, a)
	if err := s.oauth.CheckAllow(r.Context(), in); err != nil {
		return err
	}
	handle, options, err := s.passkeys.BeginConsent(r.Context(), b.approver.ApproverID, in.Binding())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ceremonyStart{Handle: handle, Options: options})
	return nil
}
