package identity

import (
	"context"
	"crypto/rand"
	"sync"
	"time"

	"github.com/countersign/countersign"
)

// SessionTTL is how long a browser session lasts (ADR 0007: 12 hours).
const SessionTTL = 12 * time.Hour

// Sessions signs approvers in and out of the inbox.
type Sessions struct {
	Store countersign.Store
	Clock countersign.Clock
	// Slots are where password checks wait for argon2id (nil: the
	// process's), at most SlotWait each (0: as long as the request lasts).
	Slots    *HashSlots
	SlotWait time.Duration
}

// dummyHash is checked against when the username is unknown, so that an
// unknown name costs as much time as a wrong password and names cannot be
// probed by timing. It has HashPassword's parameters and a random key that
// no password yields: made without hashing, so that no sign-in waits for
// it to be made.
var dummyHash = sync.OnceValue(func() string {
	salt, key := make([]byte, 16), make([]byte, argonKeyLen)
	rand.Read(salt)
	rand.Read(key)
	passes, memory, threads := argonParams()
	return phcHash(passes, memory, threads, salt, key)
})

// PasswordSignIn is one attempt to sign in with a password.
type PasswordSignIn struct {
	Username, Password string
	Client, UserAgent  string
	// Known says the browser has signed in as this approver before (see
	// KnownDevice): its check goes ahead of unknown browsers' checks.
	Known bool
}

// SignIn checks an approver's password and opens a session in the first of
// its accounts. It returns the session's secret id, which only the cookie
// holds. Errors: EUNAUTHORIZED, with the same message for an unknown name
// and a wrong password; EFORBIDDEN; ELIMIT (ErrHashBusy).
func (s *Sessions) SignIn(ctx context.Context, username, password, client, userAgent string) (string, *countersign.Session, error) {
	return s.SignInPassword(ctx, PasswordSignIn{Username: username, Password: password, Client: client, UserAgent: userAgent})
}

// SignInPassword is SignIn with the whole attempt. Errors: as SignIn's.
func (s *Sessions) SignInPassword(ctx context.Context, in PasswordSignIn) (string, *countersign.Session, error) {
	turn := PasswordTurn{Slots: s.Slots, Known: in.Known, Wait: s.SlotWait}
	ap, err := s.Store.ApproverByUsername(ctx, in.Username)
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		if _, err := CheckPasswordTurn(ctx, dummyHash(), in.Password, turn); err != nil {
			return "", nil, err
		}
		return "", nil, wrongPassword()
	} else if err != nil {
		return "", nil, err
	}
	// A passkey-only approver has no password hash: the dummy one is
	// checked instead, so that the refusal costs and reads exactly as a
	// wrong password's.
	hash := ap.PasswordHash
	if hash == "" {
		hash = dummyHash()
	}
	if ok, err := CheckPasswordTurn(ctx, hash, in.Password, turn); err != nil {
		return "", nil, err
	} else if !ok || ap.PasswordHash == "" {
		return "", nil, wrongPassword()
	}
	return s.open(ctx, ap, in.Client, in.UserAgent)
}

// KnownDevice reports whether approverID, which a browser's device cookie
// names, is the approver of username: only then does the cookie speak for
// this sign-in. Errors: only the store's.
func (s *Sessions) KnownDevice(ctx context.Context, username, approverID string) (bool, error) {
	ap, err := s.Store.ApproverByUsername(ctx, username)
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return ap.ID == approverID, nil
}

// open opens a session for an approver whose credential was checked (a
// password now; a passkey, which takes no argon2id slot, later).
func (s *Sessions) open(ctx context.Context, ap *countersign.Approver, client, userAgent string) (string, *countersign.Session, error) {
	accounts, err := s.Store.MembershipAccounts(ctx, ap.ID)
	if err != nil {
		return "", nil, err
	}
	if len(accounts) == 0 {
		return "", nil, countersign.Errorf(countersign.EFORBIDDEN, "this approver belongs to no account")
	}
	now := s.Clock.Now()
	id := countersign.NewSecret("")
	if len(userAgent) > 200 {
		userAgent = userAgent[:200]
	}
	sess := &countersign.Session{
		Hash: countersign.HashSecret(id), ApproverID: ap.ID, AccountID: accounts[0].ID,
		CreatedAt: now, ExpiresAt: now.Add(SessionTTL), LastSeenAt: now, UserAgent: userAgent, Client: client,
	}
	if err := s.Store.CreateSession(ctx, sess); err != nil {
		return "", nil, err
	}
	return id, sess, nil
}

// Open opens a session for an approver who proved themselves with a
// passkey, in the first of their accounts, and returns the session's
// secret id, which only the cookie holds.
func (s *Sessions) Open(ctx context.Context, ap *countersign.Approver, client, userAgent string) (string, *countersign.Session, error) {
	return s.open(ctx, ap, client, userAgent)
}

func wrongPassword() error {
	return countersign.Errorf(countersign.EUNAUTHORIZED, "Wrong username or password.")
}

// Session returns the live session of a cookie's id, and the approver acting
// for the session's account. Errors: ENOTFOUND.
func (s *Sessions) Session(ctx context.Context, id string) (*countersign.Session, countersign.ApproverPrincipal, error) {
	if id == "" || len(id) > 128 {
		return nil, countersign.ApproverPrincipal{}, countersign.Errorf(countersign.ENOTFOUND, "no session")
	}
	sess, ap, err := s.Store.SessionByHash(ctx, countersign.HashSecret(id), s.Clock.Now())
	if err != nil {
		return nil, countersign.ApproverPrincipal{}, err
	}
	// Record use at most once a minute, so that reads stay reads.
	if now := s.Clock.Now(); now.Sub(sess.LastSeenAt) > time.Minute {
		if err := s.Store.TouchSession(ctx, sess.Hash, now); err != nil {
			return nil, countersign.ApproverPrincipal{}, err
		}
	}
	return sess, countersign.ApproverPrincipal{ApproverID: ap.ID, Username: ap.Username, AccountID: sess.AccountID, Role: sess.Role}, nil
}

// SignOut ends the session of a cookie's id.
func (s *Sessions) SignOut(ctx context.Context, id string) error {
	return s.Store.DeleteSession(ctx, countersign.HashSecret(id))
}
