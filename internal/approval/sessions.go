package approval

import (
	"context"
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
}

// dummyHash is checked against when the username is unknown, so that an
// unknown name costs as much time as a wrong password and names cannot be
// probed by timing. It is made on first use: hashing costs 64 MiB and a
// fraction of a second that a process that never signs anyone in need not
// pay.
var dummyHash = sync.OnceValue(func() string { return HashPassword("countersign-no-such-approver") })

// SignIn checks an approver's password and opens a session in the first of
// its accounts. It returns the session's secret id, which only the cookie
// holds. Errors: EUNAUTHORIZED, with the same message for an unknown name
// and a wrong password.
func (s *Sessions) SignIn(ctx context.Context, username, password, client, userAgent string) (string, *countersign.Session, error) {
	ap, err := s.Store.ApproverByUsername(ctx, username)
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		if _, err := CheckPasswordContext(ctx, dummyHash(), password); err != nil {
			return "", nil, err
		}
		return "", nil, wrongPassword()
	} else if err != nil {
		return "", nil, err
	}
	if ok, err := CheckPasswordContext(ctx, ap.PasswordHash, password); err != nil {
		return "", nil, err
	} else if !ok {
		return "", nil, wrongPassword()
	}
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
	return sess, countersign.ApproverPrincipal{ApproverID: ap.ID, Username: ap.Username, AccountID: sess.AccountID}, nil
}

// SignOut ends the session of a cookie's id.
func (s *Sessions) SignOut(ctx context.Context, id string) error {
	return s.Store.DeleteSession(ctx, countersign.HashSecret(id))
}
