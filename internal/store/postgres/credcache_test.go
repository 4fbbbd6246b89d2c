package postgres

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/store/storetest"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/jackc/pgx/v5"
)

// lookupCounter counts the credential lookups a store sends to the
// database.
type lookupCounter struct{ n atomic.Int64 }

func (c *lookupCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "FROM agent_keys WHERE hash") || strings.Contains(d.SQL, "FROM approver_tokens t JOIN approvers") {
		c.n.Add(1)
	}
	return ctx
}
func (c *lookupCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestCredentialsKeptUntilChanged: while its change feed listens, a
// replica looks an agent key or an approver token up once and answers
// from memory after, until anything changes the credentials. A change it
// makes itself holds for its next lookup at once; one made by another
// replica, or by a statement typed by hand, holds as soon as the
// notification arrives, with no expiry of the kept copy needed (its clock
// is stopped here). Without the feed nothing is kept.
func TestCredentialsKeptUntilChanged(t *testing.T) {
	url := Migrated.SchemaURL(t)
	ctx := t.Context()
	lookups := &lookupCounter{}
	a, err := Open(ctx, url, nil, func(o *options) { o.tracer = lookups })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b := openTest(t, url)
	stopped := time.Now()
	a.creds.now = func() time.Time { return stopped }

	acc, key := seed(t, b, 0)
	ap := &countersign.Approver{Username: "ann", PasswordHash: "x", CreatedAt: storetest.Base}
	if err := b.CreateApprover(ctx, ap); err != nil {
		t.Fatal(err)
	}
	if err := b.AddMembership(ctx, ap.ID, acc.ID, countersign.RoleAdmin, storetest.Base); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"phone", "laptop"} {
		tok := &countersign.ApproverToken{ApproverID: ap.ID, AccountID: acc.ID, Name: name, Hash: "t-" + name, CreatedAt: storetest.Base}
		if err := b.CreateApproverToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	keyRevoked := func() bool {
		k, err := a.AgentKeyByHash(ctx, key.Hash)
		if err != nil {
			t.Fatal(err)
		}
		return k.Revoked()
	}
	tokenRevoked := func(hash string) bool {
		tok, _, err := a.ApproverTokenByHash(ctx, hash)
		if err != nil {
			t.Fatal(err)
		}
		return tok.Revoked()
	}
	lookedUp := func(want int64, after string) {
		t.Helper()
		if n := lookups.n.Swap(0); n != want {
			t.Fatalf("%s: %d lookups sent to the database, want %d", after, n, want)
		}
	}

	// No feed: every lookup reads the database.
	keyRevoked()
	keyRevoked()
	lookedUp(2, "two lookups without the change feed")

	listen(t, a, nil)
	keyRevoked()
	keyRevoked()
	tokenRevoked("t-phone")
	tokenRevoked("t-phone")
	lookedUp(2, "a key and a token looked up twice each while listening")

	// Revoked by another replica: heard of.
	if err := b.RevokeAgentKey(ctx, acc.ID, key.ID, storetest.Base); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, keyRevoked, "the key revoked on the other replica refused here")

	// Revoked here: at once.
	tokenRevoked("t-laptop")
	if err := a.RevokeApproverToken(ctx, ap.ID, "laptop", storetest.Base); err != nil {
		t.Fatal(err)
	}
	if !tokenRevoked("t-laptop") {
		t.Fatal("the token revoked by this replica is still accepted by it")
	}

	// Changed by hand: the trigger announces it.
	tokenRevoked("t-phone")
	exec(t, b, `UPDATE approver_tokens SET revoked_at = 1 WHERE hash = 't-phone'`)
	testutil.Eventually(t, func() bool { return tokenRevoked("t-phone") }, "the token revoked by hand refused")

	// The approver leaves the account: the token is not found any more.
	exec(t, b, `UPDATE approver_tokens SET revoked_at = 0`)
	testutil.Eventually(t, func() bool { return !tokenRevoked("t-phone") }, "the token restored by hand accepted")
	exec(t, b, `DELETE FROM memberships WHERE approver_id = $1`, ap.ID)
	testutil.Eventually(t, func() bool {
		_, _, err := a.ApproverTokenByHash(ctx, "t-phone")
		return countersign.ErrorCode(err) == countersign.ENOTFOUND
	}, "the token of an approver who left the account not found")
}
