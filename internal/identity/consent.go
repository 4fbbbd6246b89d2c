package identity

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/countersign/countersign"
)

// Allowing a connection gives an application the account's tools, up to
// the tiers allowed. A session cookie proves that a browser signed in, not
// that a human clicked: an agent driving the approver's browser could open
// the consent page of a client it registered and allow itself more than
// its own key may do. So Allow takes a fresh proof of the approver, given
// on the consent page: the password typed again, or a passkey assertion
// of exactly this consent.

// The methods of a ConsentProof.
const (
	ProofPassword = "password"
	ProofPasskey  = "webauthn"
)

// purposeConsent is the purpose of a consent's passkey ceremony.
const purposeConsent = "consent"

// ConsentProof is the approver's fresh proof of one consent.
type ConsentProof struct {
	// Method is ProofPassword (the approver's password, checked again in
	// the consent form) or ProofPasskey.
	Method     string
	ApproverID string
	// Binding is the hash of the consent a passkey's challenge was made
	// of (ConsentBinding.Hash); empty for a password, which is typed in
	// the very form it allows.
	Binding   string
	PasskeyID string
}

// ErrConsentProof refuses a consent without a fresh proof of the approver.
var ErrConsentProof = countersign.Errorf(countersign.EFORBIDDEN,
	"Allowing a connection needs your password or your passkey, given on the consent page: it proves that you, not something driving this browser, allow it")

// ConsentBinding is what a consent allows: the client, where its code
// goes, the PKCE challenge the code is bound to, the account and the
// tiers.
type ConsentBinding struct {
	ClientID, RedirectURI, Challenge, AccountID string
	Tiers                                       []string
}

// Binding returns what in allows, its tiers lowest first.
func (in AllowInput) Binding() ConsentBinding {
	return ConsentBinding{ClientID: in.Client.ID, RedirectURI: in.RedirectURI, Challenge: in.Challenge,
		AccountID: in.AccountID, Tiers: normalTiers(in.Tiers)}
}

// Hash is SHA-256 over every field: a passkey assertion made for it
// proves this consent and no other.
func (b ConsentBinding) Hash() string {
	sum := sha256.Sum256([]byte("countersign consent v1\x00" + b.ClientID + "\x00" + b.RedirectURI + "\x00" + b.Challenge +
		"\x00" + b.AccountID + "\x00" + strings.Join(b.Tiers, ",")))
	return hex.EncodeToString(sum[:])
}

// normalTiers are the known tiers of tiers, lowest first, without repeats.
func normalTiers(tiers []string) []string {
	var out []string
	for _, t := range GrantTiers {
		if slices.Contains(tiers, t) {
			out = append(out, t)
		}
	}
	return out
}

// proven refuses in unless it carries a proof of its approver: a password,
// or a passkey assertion of exactly this consent.
func (in AllowInput) proven() error {
	p := in.Proof
	if p == nil || p.ApproverID != in.Approver.ApproverID {
		return ErrConsentProof
	}
	switch {
	case p.Method == ProofPassword:
		return nil
	case p.Method == ProofPasskey && p.Binding == in.Binding().Hash():
		return nil
	}
	return ErrConsentProof
}

// PasswordProof is the proof of an approver whose password the consent
// form carried and the caller checked.
func PasswordProof(approverID string) *ConsentProof {
	return &ConsentProof{Method: ProofPassword, ApproverID: approverID}
}

// consentChallenge is what a consent's challenge is made of, kept with
// the ceremony.
type consentChallenge struct {
	Nonce   string `json:"nonce"`
	Binding string `json:"binding"`
}

func (c consentChallenge) challenge() []byte {
	sum := sha256.Sum256([]byte("countersign consent v1\x00" + c.Nonce + "\x00" + c.Binding))
	return sum[:]
}

// ConsentChallenge is the challenge a consent's passkey ceremony carries;
// tests check that the browser signed exactly it.
func ConsentChallenge(nonce string, b ConsentBinding) []byte {
	return consentChallenge{Nonce: nonce, Binding: b.Hash()}.challenge()
}

// ErrNoPasskeyToConsent refuses a consent's passkey ceremony of an
// approver without passkeys.
var ErrNoPasskeyToConsent = countersign.Errorf(countersign.EFORBIDDEN,
	"You have no passkey yet: type your password to allow the connection")

// BeginConsent starts the passkey assertion of one consent: its challenge
// is bound to everything b holds. Errors: EFORBIDDEN when the approver has
// no passkey.
func (p *Passkeys) BeginConsent(ctx context.Context, approverID string, b ConsentBinding) (handle string, options json.RawMessage, err error) {
	u, err := p.userOf(ctx, approverID)
	if err != nil {
		return "", nil, err
	}
	if len(u.keys) == 0 {
		return "", nil, ErrNoPasskeyToConsent
	}
	c := consentChallenge{Nonce: randomNonce(), Binding: b.Hash()}
	assertion, session, err := p.wa.BeginLogin(u, webauthn.WithChallenge(c.challenge()),
		webauthn.WithUserVerification(protocol.VerificationRequired))
	if err != nil {
		return "", nil, fmt.Errorf("begin consent: %w", err)
	}
	handle, err = p.open(ctx, purposeConsent, approverID, ceremonyData{Session: *session, Consent: &c})
	if err != nil {
		return "", nil, err
	}
	out, err := json.Marshal(assertion)
	return handle, out, err
}

// VerifyConsent checks the passkey assertion of a consent, made by this
// approver's passkey with user verification for exactly b, and returns
// the proof Allow takes. The ceremony is used up whatever the outcome.
// Errors: EINVALID with the reason; nothing else changes.
func (p *Passkeys) VerifyConsent(ctx context.Context, approverID string, b ConsentBinding, handle string, response []byte) (*ConsentProof, error) {
	c, cd, err := p.take(ctx, purposeConsent, handle)
	if err != nil {
		return nil, err
	}
	ch := cd.Consent
	if c.ApproverID != approverID || ch == nil {
		return nil, ceremonyGone()
	}
	if ch.Binding != b.Hash() {
		return nil, countersign.Errorf(countersign.EINVALID, "the passkey confirmed another connection, account or choice of tiers; confirm this one again")
	}
	if subtle.ConstantTimeCompare([]byte(cd.Session.Challenge), []byte(b64.EncodeToString(ch.challenge()))) != 1 {
		return nil, ceremonyGone()
	}
	pk, err := p.assertion(ctx, approverID, cd.Session, response, "Confirming with the passkey")
	if err != nil {
		return nil, err
	}
	return &ConsentProof{Method: ProofPasskey, ApproverID: approverID, Binding: ch.Binding, PasskeyID: pk.ID}, nil
}

// assertion checks an assertion of the approver's passkey against the
// ceremony's session and records the passkey's use; what names the
// ceremony in a refusal.
func (p *Passkeys) assertion(ctx context.Context, approverID string, session webauthn.SessionData, response []byte, what string) (*countersign.Passkey, error) {
	parsed, err := protocol.ParseCredentialRequestResponseBytes(response)
	if err != nil {
		return nil, refused(what, err)
	}
	u, err := p.userOf(ctx, approverID)
	if err != nil {
		return nil, err
	}
	cred, err := p.wa.ValidateLogin(u, session, parsed)
	if err != nil {
		return nil, refused(what, err)
	}
	for _, k := range u.keys {
		if string(k.CredentialID) == string(cred.ID) {
			return k, p.used(ctx, k, cred)
		}
	}
	return nil, refused(what, nil)
}
