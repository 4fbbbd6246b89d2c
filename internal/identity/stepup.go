package identity

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/countersign/countersign"
)

// stepUpBinding is what a step-up challenge is made of, kept with the
// ceremony.
type stepUpBinding struct {
	Nonce       string `json:"nonce"`
	RequestID   string `json:"request_id"`
	BindingHash string `json:"binding_hash"`
	Decision    string `json:"decision"`
	Minutes     int    `json:"minutes"`
}

// challenge is SHA-256 over the nonce, the request id, its binding hash,
// the decision and the window's minutes: an assertion made for it proves
// this decision on this request and nothing else.
func (b stepUpBinding) challenge() []byte {
	sum := sha256.Sum256([]byte("countersign step-up v1\x00" + b.Nonce + "\x00" + b.RequestID + "\x00" + b.BindingHash +
		"\x00" + b.Decision + "\x00" + strconv.Itoa(b.Minutes)))
	return sum[:]
}

// StepUpChallenge is the challenge a step-up of this binding carries; tests
// check that the browser signed exactly it.
func StepUpChallenge(nonce, requestID, bindingHash, decision string, minutes int) []byte {
	return stepUpBinding{Nonce: nonce, RequestID: requestID, BindingHash: bindingHash, Decision: decision, Minutes: minutes}.challenge()
}

// BeginStepUp starts the assertion of one decision on one request: the
// challenge is bound to the request id, its binding hash, the decision and
// the window's minutes. Errors: EFORBIDDEN when the approver has no
// passkey.
func (p *Passkeys) BeginStepUp(ctx context.Context, approverID string, r *countersign.Request, d countersign.DecisionInput) (handle string, options json.RawMessage, err error) {
	u, err := p.userOf(ctx, approverID)
	if err != nil {
		return "", nil, err
	}
	if len(u.keys) == 0 {
		return "", nil, ErrNoPasskey
	}
	b := stepUpBinding{Nonce: randomNonce(), RequestID: r.ID, BindingHash: r.BindingHash(), Decision: string(d.Decision), Minutes: d.AutoApproveMinutes}
	assertion, session, err := p.wa.BeginLogin(u, webauthn.WithChallenge(b.challenge()),
		webauthn.WithUserVerification(protocol.VerificationRequired))
	if err != nil {
		return "", nil, fmt.Errorf("begin step-up: %w", err)
	}
	handle, err = p.open(ctx, purposeStepUp, approverID, ceremonyData{Session: *session, StepUp: &b})
	if err != nil {
		return "", nil, err
	}
	out, err := json.Marshal(assertion)
	return handle, out, err
}

// ErrNoPasskey refuses a step-up of an approver without passkeys.
var ErrNoPasskey = countersign.Errorf(countersign.EFORBIDDEN,
	"Approving this request needs a passkey, and you have none yet. Add one under Passkeys, then approve here")

// VerifyStepUp checks the assertion of a step-up for this request and
// decision, made by this approver's passkey with user verification, and
// returns the proof that Decide takes. The ceremony is used up whatever
// the outcome. Errors: EINVALID with the reason; nothing else changes.
func (p *Passkeys) VerifyStepUp(ctx context.Context, approverID string, r *countersign.Request, d countersign.DecisionInput, handle string, response []byte) (*countersign.Verification, error) {
	c, cd, err := p.take(ctx, purposeStepUp, handle)
	if err != nil {
		return nil, err
	}
	b := cd.StepUp
	if c.ApproverID != approverID || b == nil {
		return nil, ceremonyGone()
	}
	if b.RequestID != r.ID || b.BindingHash != r.BindingHash() || b.Decision != string(d.Decision) || b.Minutes != d.AutoApproveMinutes {
		return nil, countersign.Errorf(countersign.EINVALID, "the passkey confirmed another request or another decision; confirm this one again")
	}
	if subtle.ConstantTimeCompare([]byte(cd.Session.Challenge), []byte(b64.EncodeToString(b.challenge()))) != 1 {
		return nil, ceremonyGone()
	}
	parsed, err := protocol.ParseCredentialRequestResponseBytes(response)
	if err != nil {
		return nil, refused("Confirming with the passkey", err)
	}
	u, err := p.userOf(ctx, approverID)
	if err != nil {
		return nil, err
	}
	cred, err := p.wa.ValidateLogin(u, cd.Session, parsed)
	if err != nil {
		return nil, refused("Confirming with the passkey", err)
	}
	var pk *countersign.Passkey
	for _, k := range u.keys {
		if string(k.CredentialID) == string(cred.ID) {
			pk = k
		}
	}
	if pk == nil {
		return nil, refused("Confirming with the passkey", nil)
	}
	if err := p.used(ctx, pk, cred); err != nil {
		return nil, err
	}
	return &countersign.Verification{Method: "webauthn", CredentialID: CredentialID(pk), PasskeyID: pk.ID,
		RequestID: r.ID, BindingHash: b.BindingHash, Decision: d.Decision, Minutes: d.AutoApproveMinutes}, nil
}
