package sqlite

import (
	"context"
	"encoding/json"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// cacheFixture is a database with an account, a key, an approver with a
// token, and a channel, each read once so that the caches hold them.
type cacheFixture struct {
	path               string
	db                 *DB
	account            *countersign.Account
	key                *countersign.AgentKey
	approver           *countersign.Approver
	token              *countersign.ApproverToken
	channel            *countersign.Channel
	keyHash, tokenHash string
}

func newCacheFixture(t *testing.T) *cacheFixture {
	t.Helper()
	f := &cacheFixture{path: filepath.Join(t.TempDir(), "countersign.db")}
	f.db = openTest(t, f.path)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Second)
	f.account = &countersign.Account{ID: countersign.NewID("acc_"), Name: "default", CreatedAt: now}
	f.keyHash, f.tokenHash = countersign.HashSecret("csk_cache"), countersign.HashSecret("cst_cache")
	f.key = &countersign.AgentKey{ID: countersign.NewID("key_"), AccountID: f.account.ID, Name: "agent", Hash: f.keyHash, Hint: "csk_ca", CreatedAt: now,
		SeedSecret: []byte("sealed")}
	f.approver = &countersign.Approver{ID: countersign.NewID("apr_"), Username: "alice", PasswordHash: "x", CreatedAt: now}
	f.token = &countersign.ApproverToken{ID: countersign.NewID("tok_"), ApproverID: f.approver.ID, AccountID: f.account.ID, Name: "cli",
		Hash: f.tokenHash, Hint: "cst_ca", CreatedAt: now}
	f.channel = &countersign.Channel{ID: countersign.NewID("chn_"), AccountID: f.account.ID, Name: "hook", Type: countersign.ChannelWebhook,
		Config: json.RawMessage(`{"url":"https://hooks.example.com/a"}`), Secret: []byte("sealed"), CreatedAt: now}
	for _, err := range []error{
		f.db.CreateAccount(ctx, f.account),
		f.db.CreateAgentKey(ctx, f.key),
		f.db.CreateApprover(ctx, f.approver),
		f.db.AddMembership(ctx, f.approver.ID, f.account.ID, countersign.RoleAdmin, now),
		f.db.CreateApproverToken(ctx, f.token),
		f.db.CreateChannel(ctx, f.channel),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	f.read(t) // fill the caches
	return f
}

// read reads the key, the token and the channels, as a server does on
// every call.
func (f *cacheFixture) read(t *testing.T) (key *countersign.AgentKey, channels []*countersign.Channel, tokenErr error) {
	t.Helper()
	ctx := t.Context()
	key, err := f.db.AgentKeyByHash(ctx, f.keyHash)
	if err != nil {
		t.Fatalf("AgentKeyByHash: %v", err)
	}
	_, _, tokenErr = f.db.ApproverTokenByHash(ctx, f.tokenHash)
	channels, err = f.db.Channels(ctx, f.account.ID)
	if err != nil {
		t.Fatalf("Channels: %v", err)
	}
	return key, channels, tokenErr
}

// A cached credential or channel is never served after a change to it has
// been committed, by this process or any other, and what the caches hand
// out is the caller's own.
func TestCacheChanges(t *testing.T) {
	f := newCacheFixture(t)
	ctx := t.Context()
	if _, ok := f.db.eng.CacheVersion(); !ok && runtime.GOOS != "windows" {
		t.Fatal("no change counter: nothing is cached")
	}

	// Reads are served from the caches: a row changed behind the
	// store's back (no counter moved) still reads as before.
	raw := rawDB(t, f.path)
	exec(t, raw, `UPDATE agent_keys SET name = 'renamed' WHERE id = ?`, f.key.ID)
	if k, _, _ := f.read(t); k.Name != "agent" {
		t.Fatalf("the key was read again from the database (%q): nothing is cached", k.Name)
	}
	exec(t, raw, `UPDATE agent_keys SET name = 'agent' WHERE id = ?`, f.key.ID)

	// What the caches hand out is a copy.
	k, cs, _ := f.read(t)
	k.SeedSecret[0], cs[0].Config[2] = 'X', 'X'
	cs[0].Name = "changed"
	if k, cs, _ := f.read(t); string(k.SeedSecret) != "sealed" || cs[0].Name != "hook" || string(cs[0].Config) != `{"url":"https://hooks.example.com/a"}` {
		t.Fatalf("a caller's change reached the cache: %q, %q, %s", k.SeedSecret, cs[0].Name, cs[0].Config)
	}

	// Changes by this process.
	if err := f.db.UpdateChannel(ctx, &countersign.Channel{ID: f.channel.ID, AccountID: f.account.ID, Type: countersign.ChannelWebhook,
		Config: json.RawMessage(`{"url":"https://hooks.example.com/b"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, cs, _ := f.read(t); len(cs) != 1 || string(cs[0].Config) != `{"url":"https://hooks.example.com/b"}` {
		t.Fatalf("channels after an update here: %+v", cs)
	}
	if _, err := f.db.RemoveMembership(ctx, f.approver.ID, f.account.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.read(t); countersign.ErrorCode(err) != countersign.ENOTFOUND {
		t.Fatalf("the token of an approver who left the account: %v, want not found", err)
	}

	// Changes by another process: its commit is seen as soon as it has
	// returned, long before the caches' own limit.
	otherProcess(t, f.path, "revoke-key", f.account.ID)
	if k, _, _ := f.read(t); !k.Revoked() {
		t.Fatal("a key revoked by another process is still served as valid")
	}
	otherProcess(t, f.path, "remove-channel", f.account.ID)
	if _, cs, _ := f.read(t); len(cs) != 0 {
		t.Fatalf("a channel removed by another process is still listed: %+v", cs)
	}
}

// otherProcess runs TestCacheOtherProcess in a new process of this test
// binary, to make one change on the database at path.
func otherProcess(t *testing.T, path, action, accountID string) {
	t.Helper()
	cmd := osexec.Command(os.Args[0], "-test.run=^TestCacheOtherProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "CACHE_TEST_DB="+path, "CACHE_TEST_ACTION="+action, "CACHE_TEST_ACCOUNT="+accountID)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s in another process: %v\n%s", action, err, out)
	}
}

// TestCacheOtherProcess is the other process of TestCacheChanges.
func TestCacheOtherProcess(t *testing.T) {
	path := os.Getenv("CACHE_TEST_DB")
	if path == "" {
		return // run by TestCacheChanges only
	}
	db, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	acc := os.Getenv("CACHE_TEST_ACCOUNT")
	switch a := os.Getenv("CACHE_TEST_ACTION"); a {
	case "revoke-key":
		err = db.RevokeAgentKey(context.Background(), acc, "agent", time.Now())
	case "remove-channel":
		err = db.RemoveChannel(context.Background(), acc, "hook")
	default:
		t.Fatalf("unknown action %q", a)
	}
	if err != nil {
		t.Fatal(err)
	}
}
