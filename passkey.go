package countersign

import (
	"context"
	"time"
)

// Passkey is a WebAuthn credential of an approver: the public half of a key
// pair that an authenticator (a phone, a security key, the operating
// system's keychain) holds for this server's relying party id. Nothing of
// it is secret: it verifies signatures and cannot make them.
type Passkey struct {
	ID           string // pk_…, the name the CLI and the pages use
	ApproverID   string
	CredentialID []byte // the authenticator's id of the credential, unique
	PublicKey    []byte // COSE key
	SignCount    uint32 // the authenticator's signature counter; 0 when it keeps none
	AAGUID       []byte
	Transports   []string
	// Flags are the authenticator data flags seen at registration (user
	// present, user verified, backup eligible, backup state): a login
	// whose backup eligibility differs is refused.
	Flags      uint8
	Name       string
	CreatedAt  time.Time
	LastUsedAt time.Time // zero: never used
}

// ErrPasskeyTaken is the conflict of a passkey whose credential or name
// the approver already registered.
func ErrPasskeyTaken() *Error {
	return Errorf(ECONFLICT, "this passkey, or a passkey of this name, is already registered")
}

// ErrNoPasskey is the ENOTFOUND of removing a passkey by an id or name
// the approver has none of.
func ErrNoPasskey(idOrName string) *Error {
	return Errorf(ENOTFOUND, "no passkey %q", idOrName)
}

// ErrLastPasskey is the conflict of removing the last passkey of an
// approver who has no password: it would lock the approver out.
func ErrLastPasskey() *Error {
	return Errorf(ECONFLICT, "this is the only passkey of an approver without a password: removing it would lock the approver out")
}

// ErrNoPasskeyToSignIn is the conflict of clearing the password of an
// approver without a passkey: it would lock the approver out.
func ErrNoPasskeyToSignIn() *Error {
	return Errorf(ECONFLICT, "the approver has no passkey: without a password it could never sign in")
}

// ErrPasskeyReplayed is the conflict of an assertion whose signature
// counter did not advance.
func ErrPasskeyReplayed() *Error {
	return Errorf(ECONFLICT, "the passkey's signature counter did not advance: the assertion was replayed or the passkey was copied")
}

// RefusePasskeyUse is the refusal of a passkey use whose conditional
// update changed nothing: a passkey that does not exist is not found; any
// other did not advance its signature counter (ErrPasskeyReplayed).
func RefusePasskeyUse(exists bool) error {
	if !exists {
		return NotFound("passkey")
	}
	return ErrPasskeyReplayed()
}

// Ceremony is the server's half of one WebAuthn ceremony in flight: what
// the challenge was issued for. It is kept server-side, used once and
// short-lived; only the SHA-256 hash of its handle is stored.
type Ceremony struct {
	Hash       string
	Purpose    string // register, signin, stepup
	ApproverID string // empty for a sign-in, which names no one
	Data       string // JSON: the relying party's session data and what the challenge binds
	ExpiresAt  time.Time
}

// ErrNoCeremony is the ENOTFOUND of a passkey ceremony that was never
// begun, or was taken already.
func ErrNoCeremony() *Error {
	return Errorf(ENOTFOUND, "no such ceremony")
}

// ErrCeremonyExpired is the ENOTFOUND of a passkey ceremony past its
// expiry.
func ErrCeremonyExpired() *Error {
	return Errorf(ENOTFOUND, "the ceremony expired")
}

// PasskeyStore keeps approvers' passkeys and the ceremonies in flight. It
// is part of Store.
type PasskeyStore interface {
	// ApproverByID returns an approver by id: a passkey names its
	// approver by id, never by username. Errors: ENOTFOUND.
	ApproverByID(ctx context.Context, id string) (*Approver, error)
	// CreatePasskey stores a passkey. Errors: ENOTFOUND for an unknown
	// approver, ECONFLICT when the credential id or, for the approver, the
	// name is taken.
	CreatePasskey(ctx context.Context, p *Passkey) error
	// Passkeys lists an approver's passkeys, oldest first.
	Passkeys(ctx context.Context, approverID string) ([]*Passkey, error)
	// PasskeyByCredentialID returns a passkey by its credential id.
	// Errors: ENOTFOUND.
	PasskeyByCredentialID(ctx context.Context, credentialID []byte) (*Passkey, error)
	// UsePasskey records a verified use of a passkey at now with the
	// signature counter the authenticator reported, in one conditional
	// statement: it fails with ECONFLICT, changing nothing, when the
	// stored counter is not below signCount (a replayed or cloned
	// assertion), unless both are 0 (an authenticator without a counter).
	// Errors: ENOTFOUND, ECONFLICT.
	UsePasskey(ctx context.Context, id string, signCount uint32, now time.Time) error
	// RemovePasskey removes a passkey of the approver by id or name. With
	// keepLast, it removes it only while the approver keeps a way to sign
	// in (a password, or another passkey), checked in the statement that
	// removes it, so that of removals racing for an approver's passkeys
	// at least one passkey stays; otherwise it fails with ECONFLICT
	// (ErrLastPasskey) and changes nothing. Errors: ENOTFOUND, ECONFLICT.
	RemovePasskey(ctx context.Context, approverID, idOrName string, keepLast bool) error

	// CreateCeremony stores a ceremony in flight, and forgets those
	// expired at now.
	CreateCeremony(ctx context.Context, c *Ceremony, now time.Time) error
	// Ceremony returns the ceremony of that hash and purpose without
	// using it, for a page that only shows what it is for. Errors:
	// ENOTFOUND, also when it expired at now.
	Ceremony(ctx context.Context, hash, purpose string, now time.Time) (*Ceremony, error)
	// TakeCeremony removes and returns the ceremony of that hash and
	// purpose, so that it is used once; one that expired at now is
	// removed and not returned. Errors: ENOTFOUND.
	TakeCeremony(ctx context.Context, hash, purpose string, now time.Time) (*Ceremony, error)
}
