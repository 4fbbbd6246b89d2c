package identity

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/visible"
)

// CeremonyTTL is how long a WebAuthn ceremony stays open: long enough to
// touch a security key or unlock a phone, short enough that a challenge
// seen by someone else is soon worthless.
const CeremonyTTL = 2 * time.Minute

// The purposes of ceremonies: a handle of one never opens another.
const (
	purposeRegister = "register"
	purposeSignIn   = "signin"
	purposeStepUp   = "stepup"
	purposeEnrol    = "enrol"
)

// maxPasskeyName bounds a passkey's name.
const maxPasskeyName = 64

// Passkeys runs the WebAuthn ceremonies of approvers: registration, sign-in
// with a discoverable credential (no username, and no argon2id: a password
// flood cannot starve it) and the step-up assertion of one decision. Every
// ceremony's state is kept in the store, used once and short-lived, so
// that a challenge cannot be answered twice or on another replica's
// behalf. User verification is required in every ceremony.
type Passkeys struct {
	Store    countersign.Store
	Clock    countersign.Clock
	Sessions *Sessions
	wa       *webauthn.WebAuthn
}

// NewPasskeys returns the passkey ceremonies of a server reached at
// publicURL: its host name is the relying party id and its origin the only
// origin accepted. A host that is an IP address cannot be a relying party
// id (WebAuthn), so such a URL has no passkeys: the error says so.
func NewPasskeys(store countersign.Store, clock countersign.Clock, sessions *Sessions, publicURL *url.URL) (*Passkeys, error) {
	if publicURL == nil || publicURL.Hostname() == "" {
		return nil, errors.New("passkeys need a public URL")
	}
	rpID := publicURL.Hostname()
	if err := protocol.ValidateRPID(rpID); err != nil {
		return nil, fmt.Errorf("passkeys need a host name in the public URL, not %q (%v): set COUNTERSIGN_PUBLIC_URL to a name such as https://approve.example.com, or http://localhost:8080 on one machine", rpID, err)
	}
	wa, err := webauthn.New(&webauthn.Config{
		RPID:          rpID,
		RPDisplayName: "countersign",
		RPOrigins:     []string{publicURL.Scheme + "://" + publicURL.Host},
		AuthenticatorSelection: protocol.AuthenticatorSelection{
			ResidentKey:      protocol.ResidentKeyRequirementRequired,
			UserVerification: protocol.VerificationRequired,
		},
		Timeouts: webauthn.TimeoutsConfig{
			Login:        webauthn.TimeoutConfig{Enforce: true, Timeout: CeremonyTTL, TimeoutUVD: CeremonyTTL},
			Registration: webauthn.TimeoutConfig{Enforce: true, Timeout: CeremonyTTL, TimeoutUVD: CeremonyTTL},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("passkeys: %w", err)
	}
	if clock == nil {
		clock = countersign.SystemClock{}
	}
	return &Passkeys{Store: store, Clock: clock, Sessions: sessions, wa: wa}, nil
}

// RPID returns the relying party id, the host name passkeys are bound to.
func (p *Passkeys) RPID() string { return p.wa.Config.RPID }

// user is an approver as the WebAuthn library sees it. The user handle is
// the approver's random id: no name, nothing personal.
type user struct {
	ap   *countersign.Approver
	keys []*countersign.Passkey
}

func (u *user) WebAuthnID() []byte          { return []byte(u.ap.ID) }
func (u *user) WebAuthnName() string        { return u.ap.Username }
func (u *user) WebAuthnDisplayName() string { return u.ap.Username }
func (u *user) WebAuthnCredentials() []webauthn.Credential {
	out := make([]webauthn.Credential, 0, len(u.keys))
	for _, k := range u.keys {
		out = append(out, credentialOf(k))
	}
	return out
}

func credentialOf(k *countersign.Passkey) webauthn.Credential {
	c := webauthn.Credential{
		ID: k.CredentialID, PublicKey: k.PublicKey,
		Flags:         webauthn.CredentialFlagsFromMsgpByte(k.Flags),
		Authenticator: webauthn.Authenticator{AAGUID: k.AAGUID, SignCount: k.SignCount},
	}
	for _, t := range k.Transports {
		c.Transport = append(c.Transport, protocol.AuthenticatorTransport(t))
	}
	return c
}

func (p *Passkeys) userOf(ctx context.Context, approverID string) (*user, error) {
	ap, err := p.Store.ApproverByID(ctx, approverID)
	if err != nil {
		return nil, err
	}
	keys, err := p.Store.Passkeys(ctx, approverID)
	if err != nil {
		return nil, err
	}
	return &user{ap: ap, keys: keys}, nil
}

// ceremonyData is what the store keeps of a ceremony: the library's
// session data and, for a step-up or a consent, what the challenge was
// made of.
type ceremonyData struct {
	Session webauthn.SessionData `json:"session"`
	Name    string               `json:"name,omitempty"`
	StepUp  *stepUpBinding       `json:"step_up,omitempty"`
	Consent *consentChallenge    `json:"consent,omitempty"`
}

// open stores a ceremony and returns its handle, which only the browser
// holds; the store keeps its hash.
func (p *Passkeys) open(ctx context.Context, purpose, approverID string, data ceremonyData) (string, error) {
	b, err := json.Marshal(data)
	if err != nil {
		return "", fmt.Errorf("encode ceremony: %w", err)
	}
	handle := countersign.NewSecret("")
	now := p.Clock.Now()
	err = p.Store.CreateCeremony(ctx, &countersign.Ceremony{Hash: countersign.HashSecret(handle), Purpose: purpose,
		ApproverID: approverID, Data: string(b), ExpiresAt: now.Add(CeremonyTTL)}, now)
	return handle, err
}

// take uses a ceremony up: whatever comes of the answer, the handle is
// spent.
func (p *Passkeys) take(ctx context.Context, purpose, handle string) (*countersign.Ceremony, *ceremonyData, error) {
	if handle == "" || len(handle) > 128 {
		return nil, nil, ceremonyGone()
	}
	c, err := p.Store.TakeCeremony(ctx, countersign.HashSecret(handle), purpose, p.Clock.Now())
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		return nil, nil, ceremonyGone()
	} else if err != nil {
		return nil, nil, err
	}
	var d ceremonyData
	if err := json.Unmarshal([]byte(c.Data), &d); err != nil {
		return nil, nil, fmt.Errorf("decode ceremony: %w", err)
	}
	return c, &d, nil
}

func ceremonyGone() error {
	return countersign.Errorf(countersign.EINVALID, "this passkey prompt has expired or was already used; start again")
}

// refused turns a failed check of the library into an error that says
// why, without internals.
func refused(what string, err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Details != "" {
		return countersign.Errorf(countersign.EINVALID, "%s failed: %s", what, pe.Details)
	}
	return countersign.Errorf(countersign.EINVALID, "%s failed: the passkey's answer could not be read", what)
}

// BeginRegistration starts adding a passkey for the approver. The options
// are what the browser hands to navigator.credentials.create.
func (p *Passkeys) BeginRegistration(ctx context.Context, approverID, name string) (handle string, options json.RawMessage, err error) {
	if err := validPasskeyName(name); err != nil {
		return "", nil, err
	}
	return p.beginRegistration(ctx, purposeRegister, approverID, name)
}

func (p *Passkeys) beginRegistration(ctx context.Context, purpose, approverID, name string) (string, json.RawMessage, error) {
	u, err := p.userOf(ctx, approverID)
	if err != nil {
		return "", nil, err
	}
	var exclude []protocol.CredentialDescriptor
	for _, c := range u.WebAuthnCredentials() {
		exclude = append(exclude, c.Descriptor())
	}
	creation, session, err := p.wa.BeginRegistration(u, webauthn.WithExclusions(exclude),
		webauthn.WithConveyancePreference(protocol.PreferNoAttestation))
	if err != nil {
		return "", nil, fmt.Errorf("begin registration: %w", err)
	}
	handle, err := p.open(ctx, purpose, approverID, ceremonyData{Session: *session, Name: name})
	if err != nil {
		return "", nil, err
	}
	b, err := json.Marshal(creation)
	return handle, b, err
}

// FinishRegistration checks the browser's answer to a registration and
// stores the passkey. Errors: EINVALID with the reason, which changes
// nothing.
func (p *Passkeys) FinishRegistration(ctx context.Context, approverID, handle string, response []byte) (*countersign.Passkey, error) {
	return p.finishRegistration(ctx, purposeRegister, approverID, handle, response, nil)
}

// finishRegistration checks a registration and stores its passkey; spend,
// when set, runs between the two and may still refuse.
func (p *Passkeys) finishRegistration(ctx context.Context, purpose, approverID, handle string, response []byte, spend func() error) (*countersign.Passkey, error) {
	c, d, err := p.take(ctx, purpose, handle)
	if err != nil {
		return nil, err
	}
	if c.ApproverID != approverID {
		return nil, ceremonyGone()
	}
	parsed, err := protocol.ParseCredentialCreationResponseBytes(response)
	if err != nil {
		return nil, refused("Adding the passkey", err)
	}
	u, err := p.userOf(ctx, approverID)
	if err != nil {
		return nil, err
	}
	cred, err := p.wa.CreateCredential(u, d.Session, parsed)
	if err != nil {
		return nil, refused("Adding the passkey", err)
	}
	now := p.Clock.Now()
	pk := &countersign.Passkey{
		ID: countersign.NewID("pk_"), ApproverID: approverID, CredentialID: cred.ID, PublicKey: cred.PublicKey,
		SignCount: cred.Authenticator.SignCount, AAGUID: cred.Authenticator.AAGUID, Flags: cred.Flags.MsgpByte(),
		Name: d.Name, CreatedAt: now,
	}
	for _, t := range cred.Transport {
		pk.Transports = append(pk.Transports, string(t))
	}
	if pk.Name == "" {
		pk.Name = "passkey " + now.UTC().Format("2006-01-02 15:04:05")
	}
	if spend != nil {
		if err := spend(); err != nil {
			return nil, err
		}
	}
	if err := p.Store.CreatePasskey(ctx, pk); err != nil {
		return nil, err
	}
	return pk, nil
}

func validPasskeyName(name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return countersign.Errorf(countersign.EINVALID, "give the passkey a name, such as the device it is on")
	case !utf8.ValidString(name) || utf8.RuneCountInString(name) > maxPasskeyName:
		return countersign.Errorf(countersign.EINVALID, "a passkey's name is at most %d characters", maxPasskeyName)
	case strings.ContainsFunc(name, visible.Hidden):
		// The name is printed by the CLI in a terminal, where a C1 control
		// such as U+009B starts an escape sequence, and shown on the
		// passkeys page, where a bidi override reorders it.
		return countersign.Errorf(countersign.EINVALID, "a passkey's name cannot hold control, invisible or text-reordering characters")
	}
	return nil
}

// BeginSignIn starts a sign-in with a discoverable credential: no username,
// no list of credentials, so the options tell nobody who has an account.
func (p *Passkeys) BeginSignIn(ctx context.Context) (handle string, options json.RawMessage, err error) {
	assertion, session, err := p.wa.BeginDiscoverableLogin(webauthn.WithUserVerification(protocol.VerificationRequired))
	if err != nil {
		return "", nil, fmt.Errorf("begin sign-in: %w", err)
	}
	handle, err = p.open(ctx, purposeSignIn, "", ceremonyData{Session: *session})
	if err != nil {
		return "", nil, err
	}
	b, err := json.Marshal(assertion)
	return handle, b, err
}

// FinishSignIn checks a sign-in assertion and opens a session, as a
// password sign-in does. It hashes nothing with argon2id. Errors: EINVALID
// with the reason, EUNAUTHORIZED for a passkey the server does not know,
// EFORBIDDEN for an approver of no account.
func (p *Passkeys) FinishSignIn(ctx context.Context, handle string, response []byte, client, userAgent string) (string, *countersign.Session, *countersign.Passkey, error) {
	_, d, err := p.take(ctx, purposeSignIn, handle)
	if err != nil {
		return "", nil, nil, err
	}
	parsed, err := protocol.ParseCredentialRequestResponseBytes(response)
	if err != nil {
		return "", nil, nil, refused("Signing in with the passkey", err)
	}
	var found *countersign.Passkey
	var u *user
	lookup := func(rawID, userHandle []byte) (webauthn.User, error) {
		pk, err := p.Store.PasskeyByCredentialID(ctx, rawID)
		if err != nil {
			return nil, err
		}
		if pk.ApproverID != string(userHandle) {
			return nil, errors.New("the passkey belongs to another approver")
		}
		if u, err = p.userOf(ctx, pk.ApproverID); err != nil {
			return nil, err
		}
		found = pk
		return u, nil
	}
	if _, err := p.Store.PasskeyByCredentialID(ctx, parsed.RawID); countersign.ErrorCode(err) == countersign.ENOTFOUND {
		return "", nil, nil, countersign.Errorf(countersign.EUNAUTHORIZED, "This passkey is not registered here. Sign in with your password, or use another passkey.")
	} else if err != nil {
		return "", nil, nil, err
	}
	_, cred, err := p.wa.ValidatePasskeyLogin(lookup, d.Session, parsed)
	if err != nil {
		return "", nil, nil, refused("Signing in with the passkey", err)
	}
	if err := p.used(ctx, found, cred); err != nil {
		return "", nil, nil, err
	}
	id, sess, err := p.Sessions.Open(ctx, u.ap, client, userAgent)
	return id, sess, found, err
}

// used records a verified assertion: a counter that did not advance
// (a replay, or a copied key) refuses it, and nothing else changes.
func (p *Passkeys) used(ctx context.Context, pk *countersign.Passkey, cred *webauthn.Credential) error {
	if cred.Authenticator.CloneWarning {
		return countersign.Errorf(countersign.EINVALID, "the passkey's signature counter went backwards: the answer was replayed or the passkey was copied")
	}
	err := p.Store.UsePasskey(ctx, pk.ID, cred.Authenticator.SignCount, p.Clock.Now())
	if countersign.ErrorCode(err) == countersign.ECONFLICT {
		return countersign.Errorf(countersign.EINVALID, "%s", countersign.ErrorMessage(err))
	}
	return err
}

// EnrolTTL is how long an enrolment link of the CLI stays valid.
const EnrolTTL = 30 * time.Minute

// NewEnrolment makes a one-time enrolment link's token for an approver:
// whoever opens the link within EnrolTTL may add one passkey to that
// approver, without signing in. The CLI prints it on the server, for a
// passkey-only approver or one who never signed in.
func (p *Passkeys) NewEnrolment(ctx context.Context, approverID string) (string, time.Time, error) {
	if _, err := p.Store.ApproverByID(ctx, approverID); err != nil {
		return "", time.Time{}, err
	}
	token := countersign.NewSecret("cse_")
	now := p.Clock.Now()
	expires := now.Add(EnrolTTL)
	err := p.Store.CreateCeremony(ctx, &countersign.Ceremony{Hash: countersign.HashSecret(token), Purpose: purposeEnrol,
		ApproverID: approverID, Data: "{}", ExpiresAt: expires}, now)
	return token, expires, err
}

// Enrolment names the approver of an enrolment token without using it up,
// so that its page can say who is enrolling. Errors: EINVALID when the
// token is unknown, used or expired.
func (p *Passkeys) Enrolment(ctx context.Context, token string) (*countersign.Approver, error) {
	c, err := p.peekEnrolment(ctx, token)
	if err != nil {
		return nil, err
	}
	return p.Store.ApproverByID(ctx, c.ApproverID)
}

// peekEnrolment reads the token's ceremony without using it up.
func (p *Passkeys) peekEnrolment(ctx context.Context, token string) (*countersign.Ceremony, error) {
	if !strings.HasPrefix(token, "cse_") || len(token) > 128 {
		return nil, enrolGone()
	}
	c, err := p.Store.Ceremony(ctx, countersign.HashSecret(token), purposeEnrol, p.Clock.Now())
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		return nil, enrolGone()
	}
	return c, err
}

func enrolGone() error {
	return countersign.Errorf(countersign.EINVALID, "This enrolment link is unknown, used or expired. Ask for a new one: countersign approver enrol --username NAME on the server.")
}

// BeginEnrolment starts the registration of an enrolment link.
func (p *Passkeys) BeginEnrolment(ctx context.Context, token, name string) (handle string, options json.RawMessage, err error) {
	if err := validPasskeyName(name); err != nil {
		return "", nil, err
	}
	c, err := p.peekEnrolment(ctx, token)
	if err != nil {
		return "", nil, err
	}
	return p.beginRegistration(ctx, purposeRegister+":"+c.Hash, c.ApproverID, name)
}

// FinishEnrolment checks the registration of an enrolment link, uses the
// link up and stores the passkey. A failed ceremony leaves the link usable
// until it expires; of two good ones at once, one adds its passkey.
func (p *Passkeys) FinishEnrolment(ctx context.Context, token, handle string, response []byte) (*countersign.Passkey, error) {
	c, err := p.peekEnrolment(ctx, token)
	if err != nil {
		return nil, err
	}
	return p.finishRegistration(ctx, purposeRegister+":"+c.Hash, c.ApproverID, handle, response, func() error {
		_, err := p.Store.TakeCeremony(ctx, c.Hash, purposeEnrol, p.Clock.Now())
		if countersign.ErrorCode(err) == countersign.ENOTFOUND {
			return enrolGone()
		}
		return err
	})
}

// b64 is how credential ids are shown and logged: base64url, as WebAuthn
// writes them.
var b64 = base64.RawURLEncoding

// CredentialID shows a passkey's credential id.
func CredentialID(pk *countersign.Passkey) string { return b64.EncodeToString(pk.CredentialID) }

func randomNonce() string {
	b := make([]byte, 32)
	rand.Read(b)
	return b64.EncodeToString(b)
}
