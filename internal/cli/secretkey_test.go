package cli

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/notify"
	"github.com/countersign/countersign/internal/secretkey"
	"github.com/countersign/countersign/internal/store/postgres"
	"github.com/countersign/countersign/internal/store/postgres/pgtest"
	"github.com/countersign/countersign/internal/store/sqlite"
	"github.com/countersign/countersign/internal/store/storetest"
	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite"
)

// receiver is a webhook endpoint that keeps every body it is sent.
type receiver struct {
	mu     sync.Mutex
	bodies []string
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.bodies = append(r.bodies, string(b)+" "+req.Header.Get("X-Countersign-Signature"))
	r.mu.Unlock()
}

func (r *receiver) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies...)
}

// instance is what a stolen database would hold the secrets of.
type instance struct {
	seedSecret    string // the seed key, exactly as printed: the HMAC key of the seed routes
	channelSecret string // the webhook's signing secret
	body          []byte // a seed request's body, signed with seedSecret by its client
}

// fill gives a store what a running instance has: a seed key, a webhook
// channel with a secret, pointing at hook, and a pending request whose
// outbox item holds its one-time link tokens, not sent yet.
func fill(t *testing.T, store countersign.Store, hook string) instance {
	t.Helper()
	ctx := t.Context()
	admin := &identity.Admin{Store: store}
	if _, err := admin.CreateAccount(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	_, seedSecret, err := admin.CreateSeedKey(ctx, "acme", "laptop")
	if err != nil {
		t.Fatal(err)
	}
	in := instance{seedSecret: seedSecret, channelSecret: "whsec-" + strings.Repeat("s", 24), body: []byte(`{"command":"rm -rf /srv"}`)}
	if _, err := (&notify.Admin{Store: store}).Add(ctx, notify.Spec{Account: "acme", Name: "hook", Type: countersign.ChannelWebhook,
		Settings: notify.Settings{URL: hook}, Secret: in.channelSecret}); err != nil {
		t.Fatal(err)
	}
	agent, err := (&identity.Authenticator{Store: store}).SeedAgent(ctx, in.body, sign(in.seedSecret, in.body))
	if err != nil {
		t.Fatalf("the seed key does not sign: %v", err)
	}
	svc := approval.New(store, nil, approval.NewHub(), approval.Config{Notifier: notify.NewNotifier(store)}, nil, nil)
	if _, _, err := svc.Create(ctx, agent, countersign.CreateInput{Kind: countersign.KindRm, Action: "rm", SeedID: "del-1",
		Arguments: []byte(`{"command":"rm -rf /srv"}`), Preview: "rm -rf /srv"}); err != nil {
		t.Fatal(err)
	}
	return in
}

func sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// stolenKeys is the product's store of a stolen copy, with every server
// key taken to be key: what an attacker would try with each value the copy
// holds.
type stolenKeys struct {
	countersign.Store
	key []byte
}

func (s stolenKeys) ServerKey(context.Context, string, int) ([]byte, error) { return s.key, nil }

// candidates are the keys an attacker would try: every stored server key
// as it is and every 32 bytes of it.
func candidates(stored [][]byte) [][]byte {
	var out [][]byte
	for _, v := range stored {
		out = append(out, v)
		for i := 0; i+32 <= len(v); i++ {
			out = append(out, v[i:i+32])
		}
	}
	return out
}

// attack runs the product's own code over a stolen copy with every
// candidate key: the seed routes' authenticator, which opens the sealed
// seed secret to check a signature, and the notification worker, which
// opens the outbox payload (the link tokens) and the channel secret to send
// them to the channel's URL, which the attacker points at their own
// server. reset puts the outbox item back as it was stolen, so that every
// candidate gets its try. It returns what worked.
func attack(t *testing.T, stolen countersign.Store, stored [][]byte, in instance, thief *receiver, reset func()) (opened []string) {
	t.Helper()
	ctx := t.Context()
	for _, key := range candidates(stored) {
		s := stolenKeys{Store: stolen, key: key}
		if _, err := (&identity.Authenticator{Store: s}).SeedAgent(ctx, in.body, sign(in.seedSecret, in.body)); err == nil {
			opened = append(opened, "a seed secret opened under "+hex.EncodeToString(key))
		}
		reset()
		w := notify.NewWorker(s, &notify.Delivery{}, nil, nil, notify.WorkerConfig{})
		w.RunOnce(ctx)
		if len(thief.got()) > 0 {
			return append(opened, "the outbox item was sent under "+hex.EncodeToString(key))
		}
	}
	return opened
}

// resetOutbox is the statement that puts the one outbox item back with
// its sealed payload; hexPayload is the payload in hex, lit the backend's
// way.
const resetOutbox = `UPDATE outbox SET state = 'pending', attempts = 0, next_attempt_at = 0, lease_until = 0, claim = '', payload = `

// TestStolenSQLiteOpensNothing: a copy of countersign.db alone, without
// the key file, yields no agent credential, no link token and no channel
// secret, whatever the product is made to do with it; with the key file,
// the same code opens them all (the test would see them).
func TestStolenSQLiteOpensNothing(t *testing.T) {
	t.Parallel()
	thief := &receiver{}
	thiefSrv := httptest.NewServer(thief)
	defer thiefSrv.Close()
	owner := &receiver{}
	ownerSrv := httptest.NewServer(owner)
	defer ownerSrv.Close()

	dir := t.TempDir()
	store, err := openStore(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := fill(t, store, ownerSrv.URL+"/hook")
	store.Close()

	// The copy: the database file alone.
	stolenDir := t.TempDir()
	db, err := os.ReadFile(filepath.Join(dir, "countersign.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{in.seedSecret, in.channelSecret} {
		if bytes.Contains(db, []byte(secret)) {
			t.Fatalf("the database file holds a secret as it is")
		}
	}
	stolenPath := filepath.Join(stolenDir, "countersign.db")
	if err := os.WriteFile(stolenPath, db, 0o600); err != nil {
		t.Fatal(err)
	}

	// The product refuses to open it: no key file, a new one, none.
	code, out, errOut := runCLI(t, map[string]string{"COUNTERSIGN_DATA": stolenDir}, "key", "list", "--account", "acme")
	if code != 1 || !strings.Contains(errOut, "its key file "+filepath.Join(stolenDir, "secret.key")+" is missing") || out != "" {
		t.Fatalf("key list on the copy: %d %q %q", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(stolenDir, "secret.key")); !os.IsNotExist(err) {
		t.Fatalf("a key file was left beside the copy: %v", err)
	}
	if _, err := sqlite.Open(t.Context(), stolenPath, sqlite.WithSecretKey(storetest.NewSecretKey(t))); !errors.Is(err, countersign.ErrWrongSecretKey) {
		t.Fatalf("open the copy with a new key: %v", err)
	}
	if _, err := sqlite.Open(t.Context(), stolenPath); !errors.Is(err, countersign.ErrSecretKeyNeeded) {
		t.Fatalf("open the copy without a key: %v", err)
	}

	// The attacker removes the record of the key, so that the product
	// opens the copy, and points the channel at themselves.
	raw, err := sql.Open("sqlite", stolenPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DELETE FROM secret_key`, `UPDATE notify_channels SET config = json_set(config, '$.url', '` + thiefSrv.URL + `/hook')`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	stored := rawKeys(t, raw)
	var payload []byte
	if err := raw.QueryRow(`SELECT payload FROM outbox`).Scan(&payload); err != nil || len(payload) == 0 {
		t.Fatalf("the outbox item: %x, %v", payload, err)
	}
	defer raw.Close()
	reset := func() {
		if _, err := raw.Exec(resetOutbox + `x'` + hex.EncodeToString(payload) + `'`); err != nil {
			t.Fatal(err)
		}
	}
	stolen, err := sqlite.Open(t.Context(), stolenPath)
	if err != nil {
		t.Fatal(err)
	}
	defer stolen.Close()
	if opened := attack(t, stolen, stored, in, thief, reset); len(opened) > 0 {
		t.Errorf("the copy opened: %v", opened)
	}
	if got := thief.got(); len(got) > 0 {
		t.Errorf("the copy sent its link tokens to the attacker: %q", got)
	}

	// With the key file, the product opens all of it: the seed secret
	// signs and the owner's webhook gets the link tokens, signed with the
	// channel secret.
	store, err = openStore(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := (&identity.Authenticator{Store: store}).SeedAgent(t.Context(), in.body, sign(in.seedSecret, in.body)); err != nil {
		t.Fatalf("with the key file the seed key does not sign: %v", err)
	}
	if n, err := notify.NewWorker(store, &notify.Delivery{}, nil, nil, notify.WorkerConfig{}).RunOnce(t.Context()); err != nil || n != 1 {
		t.Fatalf("with the key file the worker sent %d, %v", n, err)
	}
	got := owner.got()
	if len(got) != 1 || !strings.Contains(got[0], `"approve_url":`) || !strings.Contains(got[0], "sha256=") {
		t.Fatalf("the owner's webhook got %q; want the links, signed", got)
	}
}

// rawKeys reads every stored server key past the store.
func rawKeys(t *testing.T, raw *sql.DB) [][]byte {
	t.Helper()
	rows, err := raw.Query(`SELECT key FROM server_keys`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	if len(out) < 2 {
		t.Fatalf("%d server keys stored, want the seed and outbox keys", len(out))
	}
	return out
}

// TestStolenPostgresOpensNothing: the rows of a PostgreSQL store, read
// with SQL as pg_dump reads them, open nothing without the key file, even
// once the database is stripped of its record of the key so that the
// product opens it (as a restored dump would be).
func TestStolenPostgresOpensNothing(t *testing.T) {
	t.Parallel()
	thief := &receiver{}
	thiefSrv := httptest.NewServer(thief)
	defer thiefSrv.Close()
	url := pgtest.SchemaURL(t)
	keyFile := newKeyFile(t)
	store, err := openDatabase(t.Context(), url, storeKey{path: keyFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := fill(t, store, "http://127.0.0.1:9/hook")
	store.Close()

	// The product refuses to open it without the key file, or with
	// another.
	if _, err := postgres.Open(t.Context(), url, nil); !errors.Is(err, countersign.ErrSecretKeyNeeded) {
		t.Fatalf("open without the key: %v", err)
	}
	if _, err := postgres.Open(t.Context(), url, nil, postgres.WithSecretKey(storetest.NewSecretKey(t))); !errors.Is(err, countersign.ErrWrongSecretKey) {
		t.Fatalf("open with a new key: %v", err)
	}
	code, out, errOut := runCLI(t, nil, "key", "list", "--account", "acme", "--database-url", url)
	if code != 1 || !strings.Contains(errOut, "needs the server's secret key file") || out != "" {
		t.Fatalf("key list without the key file: %d %q %q", code, out, errOut)
	}

	// The dump: the rows as they are, read with SQL as pg_dump reads
	// them. The attacker restores it without the record of the key, so
	// that the product opens it, and points the channel at themselves.
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(t.Context(), `SELECT key FROM server_keys`)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil || len(stored) < 2 {
		t.Fatalf("server keys: %d, %v", len(stored), err)
	}
	var payload []byte
	if err := conn.QueryRow(t.Context(), `SELECT payload FROM outbox`).Scan(&payload); err != nil || len(payload) == 0 {
		t.Fatalf("the outbox item: %x, %v", payload, err)
	}
	for _, q := range []string{`DELETE FROM secret_key`,
		`UPDATE notify_channels SET config = jsonb_set(config::jsonb, '{url}', to_jsonb('` + thiefSrv.URL + `/hook'::text))::text`} {
		if _, err := conn.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	reset := func() {
		if _, err := conn.Exec(t.Context(), resetOutbox+`'\x`+hex.EncodeToString(payload)+`'::bytea`); err != nil {
			t.Fatal(err)
		}
	}
	stolen, err := postgres.Open(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stolen.Close()
	if opened := attack(t, stolen, stored, in, thief, reset); len(opened) > 0 {
		t.Errorf("the dump opened: %v", opened)
	}
	if got := thief.got(); len(got) > 0 {
		t.Errorf("the dump sent its link tokens to the attacker: %q", got)
	}
}

// oldDataDir makes a data directory as the version before the secret key
// wrote it: server keys stored as they are, bare audit hashes, and no
// secret_key table in a schema at the version before it. It returns the seed key's
// secret and the CSRF key.
func oldDataDir(t *testing.T, dir string) (seedSecret string, csrf []byte) {
	t.Helper()
	path := filepath.Join(dir, "countersign.db")
	old, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	admin := &identity.Admin{Store: old}
	if _, err := admin.CreateAccount(t.Context(), "acme"); err != nil {
		t.Fatal(err)
	}
	if _, seedSecret, err = admin.CreateSeedKey(t.Context(), "acme", "laptop"); err != nil {
		t.Fatal(err)
	}
	if csrf, err = old.ServerKey(t.Context(), "csrf", 32); err != nil {
		t.Fatal(err)
	}
	agent, err := (&identity.Authenticator{Store: old}).SeedAgent(t.Context(), []byte("{}"), sign(seedSecret, []byte("{}")))
	if err != nil {
		t.Fatal(err)
	}
	svc := approval.New(old, nil, approval.NewHub(), approval.Config{}, nil, nil)
	for i := range 2 {
		if _, _, err := svc.Create(t.Context(), agent, countersign.CreateInput{Kind: countersign.KindGeneric, Action: "deploy", Arguments: []byte(`{"n":` + string(rune('0'+i)) + `}`)}); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// 10 is migrations/0010_secret_key.sql, which made the table; what
	// came after it is undone too, so that the directory is as a version
	// before 10 left it.
	for _, q := range []string{
		`DROP TABLE teams_config`,                                                                                         // 25, the teams configuration
		`ALTER TABLE requests DROP COLUMN original`,                                                                       // 24, the original of an edit
		`DROP INDEX requests_call`, `ALTER TABLE requests DROP COLUMN call_id`, `ALTER TABLE requests DROP COLUMN ran_at`, // 23, what ran
		`ALTER TABLE requests DROP COLUMN ran_action`, `ALTER TABLE requests DROP COLUMN ran_args_hash`,
		`DROP TABLE votes`, `ALTER TABLE agent_keys DROP COLUMN created_by`, // 22, votes
		`ALTER TABLE memberships DROP COLUMN role`,                                            // 21, roles
		`DROP INDEX outbox_pending_created`,                                                   // 20, the oldest undelivered (19 goes with idempotency)
		`ALTER TABLE auto_approve_windows DROP COLUMN stopped_at`,                             // 18, stop marks (coverages goes whole below)
		`DROP INDEX requests_account_status_created`, `DROP INDEX requests_account_reference`, // 17, history
		`DROP INDEX requests_done_created`, `DROP INDEX auto_approve_windows_request`, `DROP INDEX outbox_request`,
		`DROP TABLE idempotency`,
		`ALTER TABLE requests DROP COLUMN tier`, `ALTER TABLE requests DROP COLUMN protected`, // 14, the facts of requests
		`DROP TABLE oauth_tokens`, `DROP TABLE grants`, `DROP TABLE oauth_clients`, // 13, OAuth grants
		`DROP INDEX sessions_grant`, `ALTER TABLE sessions DROP COLUMN grant_id`,
		`DROP TABLE webauthn_credentials`, `DROP TABLE webauthn_ceremonies`, // 12, passkeys
		`DROP TABLE coverages`, `ALTER TABLE requests DROP COLUMN scope`,
		`ALTER TABLE auto_approve_windows DROP COLUMN scope`, // 11, the shapes of windows
		`DROP TABLE secret_key`, `DELETE FROM schema_migrations WHERE version >= 10`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return seedSecret, csrf
}

// TestOldDataDirSealed: the first start of this version on a data
// directory an earlier one wrote makes the key file, 0600, and seals the
// store in place: the same keys, wrapped; the old chain still verifies and
// is keyed from the next entry on.
func TestOldDataDirSealed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seedSecret, csrf := oldDataDir(t, dir)
	raw, err := sql.Open("sqlite", filepath.Join(dir, "countersign.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var before []byte
	if err := raw.QueryRow(`SELECT key FROM server_keys WHERE name = 'csrf'`).Scan(&before); err != nil || !bytes.Equal(before, csrf) {
		t.Fatalf("the old layout: %x, %v", before, err)
	}

	vars := map[string]string{"COUNTERSIGN_DATA": dir}
	code, out, errOut := runCLI(t, vars, "audit", "verify")
	keyFile := filepath.Join(dir, "secret.key")
	if code != 0 || !strings.Contains(out, "audit log intact: 3 entries") || !strings.Contains(out, "keyed with the secret key (an HMAC per entry) from entry 3 on") ||
		!strings.Contains(errOut, "made the secret key file "+keyFile) {
		t.Fatalf("audit verify at the first start: %d %q %q", code, out, errOut)
	}
	fi, err := os.Stat(keyFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v, %v; want mode 0600", fi, err)
	}
	var after []byte
	if err := raw.QueryRow(`SELECT key FROM server_keys WHERE name = 'csrf'`).Scan(&after); err != nil || bytes.Contains(after, csrf) {
		t.Fatalf("the CSRF key after sealing: %x, %v; want it wrapped", after, err)
	}

	store, err := openStore(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if got, err := store.ServerKey(t.Context(), "csrf", 32); err != nil || !bytes.Equal(got, csrf) {
		t.Errorf("the CSRF key after sealing = %x, %v; want the one before", got, err)
	}
	if _, err := (&identity.Authenticator{Store: store}).SeedAgent(t.Context(), []byte("{}"), sign(seedSecret, []byte("{}"))); err != nil {
		t.Errorf("the seed key after sealing: %v", err)
	}
	store.Close()
	// A second start changes nothing.
	if code, out2, errOut := runCLI(t, vars, "audit", "verify"); code != 0 || out2 != out || errOut != "" {
		t.Errorf("audit verify again: %d %q %q; want %q", code, out2, errOut, out)
	}
}

// TestWrongKeyFileRefused: a data directory given a key file that is not
// the one that sealed it, one open to others or one that holds no key does
// not open, and nothing is re-keyed.
func TestWrongKeyFileRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	vars := map[string]string{"COUNTERSIGN_DATA": dir}
	if code, _, errOut := runCLI(t, vars, "account", "create", "acme"); code != 0 {
		t.Fatal(errOut)
	}
	keyFile := filepath.Join(dir, "secret.key")
	orig, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile(filepath.Join(dir, "countersign.db"))
	if err != nil {
		t.Fatal(err)
	}

	other := newKeyFile(t)
	for _, args := range [][]string{{"account", "list"}, {"serve", "--addr", "127.0.0.1:0"}} {
		code, out, errOut := runCLI(t, map[string]string{"COUNTERSIGN_DATA": dir, keyFileEnv: other}, args...)
		if code != 1 || !strings.Contains(errOut, "was sealed with another secret key than the one in "+other) || strings.Contains(out, "acme") {
			t.Errorf("%v with another key file: %d %q %q", args, code, out, errOut)
		}
	}
	// A key file kept outside the data directory and open to others is
	// refused; the data directory's own is closed again with the rest of
	// the directory, and said so.
	loose := filepath.Join(t.TempDir(), "loose.key")
	if err := os.WriteFile(loose, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(loose, 0o644)
	code, out, errOut := runCLI(t, map[string]string{"COUNTERSIGN_DATA": dir, keyFileEnv: loose}, "account", "list")
	if code != 1 || !strings.Contains(errOut, "is open to others (mode 0644)") || strings.Contains(errOut, strings.TrimSpace(string(orig))) {
		t.Errorf("account list with a key file open to others: %d %q %q", code, out, errOut)
	}
	if err := os.Chmod(keyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, vars, "account", "list")
	if fi, _ := os.Stat(keyFile); code != 0 || !strings.Contains(out, "acme") || !strings.Contains(errOut, "file=secret.key mode=0644") || fi.Mode().Perm() != 0o600 {
		t.Errorf("account list with the data directory's key file open to others: %d %q %q", code, out, errOut)
	}
	if err := os.WriteFile(filepath.Join(dir, "not-a-key"), []byte("nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI(t, map[string]string{"COUNTERSIGN_DATA": dir, keyFileEnv: filepath.Join(dir, "not-a-key")}, "account", "list")
	if code != 1 || !strings.Contains(errOut, "does not hold a key: it must hold 64 hexadecimal characters") {
		t.Errorf("account list with a file that holds no key: %d %q", code, errOut)
	}
	link := filepath.Join(t.TempDir(), "link.key")
	if err := os.Symlink(keyFile, link); err != nil {
		t.Fatal(err)
	}
	// A link to the key file (as secrets mounts make) is read.
	code, out, errOut = runCLI(t, map[string]string{"COUNTERSIGN_DATA": dir, keyFileEnv: link}, "account", "list")
	if code != 0 || !strings.Contains(out, "acme") {
		t.Errorf("account list with a link to the key file: %d %q %q", code, out, errOut)
	}

	// The key file was lost: no new key is made for the sealed store.
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI(t, vars, "account", "list")
	if code != 1 || !strings.Contains(errOut, "its key file "+keyFile+" is missing: restore that file from your backup") {
		t.Errorf("account list without the key file: %d %q", code, errOut)
	}
	if _, err := os.Stat(keyFile); !os.IsNotExist(err) {
		t.Errorf("a new key file was left: %v", err)
	}
	if err := os.WriteFile(keyFile, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "countersign.db")); !bytes.Equal(got, db) {
		t.Errorf("a refused open changed the database")
	}
	if code, out, errOut := runCLI(t, vars, "account", "list"); code != 0 || !strings.Contains(out, "acme") {
		t.Errorf("account list with the key file back: %d %q %q", code, out, errOut)
	}
}

// TestAuditRewriteWithoutKey: someone with the database but not the key
// file changes an entry and rewrites the whole chain and its head with
// bare hashes: audit verify finds every rewritten entry and says that the
// chain is keyed.
func TestAuditRewriteWithoutKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store, err := openStore(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, store, "http://127.0.0.1:9/hook")
	store.Close()
	vars := map[string]string{"COUNTERSIGN_DATA": dir}
	if code, out, _ := runCLI(t, vars, "audit", "verify"); code != 0 || !strings.Contains(out, "audit log intact: 1 entries") ||
		!strings.Contains(out, "the chain is keyed with the secret key (an HMAC per entry): rewriting it needs the key file") {
		t.Fatalf("audit verify before: %d %q", code, out)
	}

	raw, err := sql.Open("sqlite", filepath.Join(dir, "countersign.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	e := countersign.AuditEntry{}
	var at int64
	if err := raw.QueryRow(`SELECT seq, at, account_id, request_id, event, actor, detail, prev_hash FROM audit_log WHERE seq = 1`).
		Scan(&e.Seq, &at, &e.AccountID, &e.RequestID, &e.Event, &e.Actor, &e.Detail, &e.PrevHash); err != nil {
		t.Fatal(err)
	}
	e.At = time.Unix(0, at).UTC()
	e.Actor = "key:someone-else"
	e.Hash = e.ComputeHash()
	if _, err := raw.Exec(`UPDATE audit_log SET actor = ?, hash = ? WHERE seq = 1`, e.Actor, e.Hash); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE audit_head SET hash = ? WHERE id = 1`, e.Hash); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, vars, "audit", "verify")
	if code != 1 || !strings.Contains(out, "entry 1: was changed after it was written") || !strings.Contains(out, "the chain is keyed") ||
		!strings.Contains(errOut, "the audit log was changed: 1 problems") {
		t.Errorf("audit verify of the rewritten chain: %d %q %q", code, out, errOut)
	}
}

// TestPostgresNeedsKeyFile: serve on PostgreSQL without a key file stops
// at once and says what to set; replicas given the same file share the
// store's keys.
func TestPostgresNeedsKeyFile(t *testing.T) {
	t.Parallel()
	url := pgtest.SchemaURL(t)
	code, out, errOut := runCLI(t, map[string]string{"COUNTERSIGN_DATABASE_URL": url}, "serve", "--addr", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errOut, "a PostgreSQL store needs the server's secret key file: set COUNTERSIGN_SECRET_KEY_FILE") || strings.Contains(out, "csk_") {
		t.Fatalf("serve without a key file: %d %q %q", code, out, errOut)
	}
	missing := filepath.Join(t.TempDir(), "secret.key")
	code, _, errOut = runCLI(t, map[string]string{"COUNTERSIGN_DATABASE_URL": url, keyFileEnv: missing}, "serve", "--addr", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errOut, "does not exist: make one with countersign secret-key create "+missing) {
		t.Fatalf("serve with a missing key file: %d %q", code, errOut)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("serve made a key file for PostgreSQL: %v", err)
	}
	if code, out, errOut := runCLI(t, nil, "secret-key", "create", missing); code != 0 || !strings.Contains(out, "made the secret key file "+missing) {
		t.Fatalf("secret-key create: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, nil, "secret-key", "create", missing); code != 1 || !strings.Contains(errOut, "file exists") {
		t.Fatalf("secret-key create over a file: %d %q", code, errOut)
	}

	// Two replicas with the same file: a seed key made through one signs
	// on the other.
	a, err := openDatabase(t.Context(), url, storeKey{path: missing}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := openDatabase(t.Context(), url, storeKey{path: missing}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	admin := &identity.Admin{Store: a}
	if _, err := admin.CreateAccount(t.Context(), "acme"); err != nil {
		t.Fatal(err)
	}
	_, secret, err := admin.CreateSeedKey(t.Context(), "acme", "laptop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (&identity.Authenticator{Store: b}).SeedAgent(t.Context(), []byte("{}"), sign(secret, []byte("{}"))); err != nil {
		t.Fatalf("the seed key on the other replica: %v", err)
	}
}

// TestCopyTakesKeyFile: a copy between data directories gives the target
// the source's key file, with which it opens; a target whose own key file
// is another key is refused and stays empty.
func TestCopyTakesKeyFile(t *testing.T) {
	t.Parallel()
	from := t.TempDir()
	store, err := openStore(t.Context(), from, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := fill(t, store, "http://127.0.0.1:9/hook")
	store.Close()

	to := filepath.Join(t.TempDir(), "to")
	code, out, errOut := runCLI(t, nil, "store", "copy", "--from", from, "--to", to)
	if code != 0 || !strings.Contains(out, "audit log intact on the copy") {
		t.Fatalf("store copy: %d %q %q", code, out, errOut)
	}
	a, _ := os.ReadFile(filepath.Join(from, "secret.key"))
	b, err := os.ReadFile(filepath.Join(to, "secret.key"))
	if err != nil || !bytes.Equal(a, b) {
		t.Fatalf("the target's key file: %v", err)
	}
	if fi, _ := os.Stat(filepath.Join(to, "secret.key")); fi.Mode().Perm() != 0o600 {
		t.Errorf("the target's key file has mode %04o", fi.Mode().Perm())
	}
	copied, err := openStore(t.Context(), to, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (&identity.Authenticator{Store: copied}).SeedAgent(t.Context(), in.body, sign(in.seedSecret, in.body)); err != nil {
		t.Errorf("the seed key on the copy: %v", err)
	}
	copied.Close()

	other := t.TempDir()
	if _, err := secretkey.Create(filepath.Join(other, "secret.key")); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI(t, nil, "store", "copy", "--from", from, "--to", other)
	if code != 1 || !strings.Contains(errOut, "sealed with another secret key than the target's") {
		t.Errorf("store copy into a store of another key: %d %q", code, errOut)
	}
	if code, out, _ := runCLI(t, map[string]string{"COUNTERSIGN_DATA": other}, "account", "list"); code != 0 || strings.Contains(out, "acme") {
		t.Errorf("the refused target: %d %q", code, out)
	}
}

// TestAuditDowngradeWithoutKey: someone with the database but not the key
// file removes the store's record of its key, puts server keys of their
// own in and rewrites the chain with bare hashes, so that the store looks
// like one an earlier version wrote. The data directory's key file was
// there before this start: the store was sealed, and is refused, not
// sealed again over the rewritten chain.
func TestAuditDowngradeWithoutKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store, err := openStore(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, store, "http://127.0.0.1:9/hook")
	store.Close()
	path := filepath.Join(dir, "countersign.db")
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	e := countersign.AuditEntry{}
	var at int64
	if err := raw.QueryRow(`SELECT seq, at, account_id, request_id, event, actor, detail, prev_hash FROM audit_log WHERE seq = 1`).
		Scan(&e.Seq, &at, &e.AccountID, &e.RequestID, &e.Event, &e.Actor, &e.Detail, &e.PrevHash); err != nil {
		t.Fatal(err)
	}
	e.At = time.Unix(0, at).UTC()
	e.Actor = "key:someone-else"
	e.Hash = e.ComputeHash()
	for _, q := range []string{
		`DELETE FROM secret_key`,
		`UPDATE server_keys SET key = zeroblob(32)`,
		`UPDATE audit_log SET actor = '` + e.Actor + `', hash = '` + e.Hash + `' WHERE seq = 1`,
		`UPDATE audit_head SET hash = '` + e.Hash + `' WHERE id = 1`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, map[string]string{"COUNTERSIGN_DATA": dir}, "audit", "verify")
	if code != 1 || strings.Contains(out, "intact") || !strings.Contains(errOut, "holds no record of the secret key it was sealed with") {
		t.Errorf("audit verify of the downgraded store: %d %q %q", code, out, errOut)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, before) {
		t.Errorf("the refused open sealed the downgraded store")
	}
}
