package cli

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/secretkey"
	"github.com/countersign/countersign/internal/store/postgres"
	"github.com/countersign/countersign/internal/store/postgres/pgtest"
	"github.com/countersign/countersign/internal/testutil"
)

// runCLI runs a command in process with the environment vars and returns
// its exit status and output (stdout then stderr).
func runCLI(t *testing.T, vars map[string]string, args ...string) (int, string, string) {
	t.Helper()
	env, stdout, stderr := testEnv(vars)
	code := Run(t.Context(), env, args)
	return code, stdout.String(), stderr.String()
}

// newKeyFile makes a secret key file for a test.
func newKeyFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret.key")
	if _, err := secretkey.Create(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDatabaseURLWins: with a database URL set, by flag, variable or
// file, the data-directory commands work on PostgreSQL and leave the data
// directory alone.
func TestDatabaseURLWins(t *testing.T) {
	t.Parallel()
	url := pgtest.SchemaURL(t)
	dir := filepath.Join(t.TempDir(), "data")
	urlFile := filepath.Join(t.TempDir(), "url")
	if err := os.WriteFile(urlFile, []byte(url+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keyFile := newKeyFile(t)
	byVar := map[string]string{"COUNTERSIGN_DATA": dir, "COUNTERSIGN_DATABASE_URL": url, keyFileEnv: keyFile}
	byFile := map[string]string{"COUNTERSIGN_DATA": dir, "COUNTERSIGN_DATABASE_URL_FILE": urlFile, keyFileEnv: keyFile}
	onlyData := map[string]string{"COUNTERSIGN_DATA": dir, keyFileEnv: keyFile}

	if code, out, errOut := runCLI(t, byVar, "account", "create", "acme"); code != 0 || !strings.Contains(out, "created account acme") {
		t.Fatalf("account create with COUNTERSIGN_DATABASE_URL: %d %q %q", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, onlyData, "key", "create", "--database-url", url, "--account", "acme", "--name", "laptop"); code != 0 || !strings.Contains(out, "csk_") {
		t.Fatalf("key create with --database-url: %d %q %q", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, byFile, "key", "list", "--account", "acme"); code != 0 || !strings.Contains(out, "laptop") {
		t.Fatalf("key list with COUNTERSIGN_DATABASE_URL_FILE: %d %q %q", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, byVar, "audit", "verify"); code != 0 || !strings.Contains(out, "audit log intact: 0 entries") {
		t.Fatalf("audit verify: %d %q %q", code, out, errOut)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the data directory was touched: %v", err)
	}
	// Without the URL, the data directory's own (new) store has no acme.
	if code, out, _ := runCLI(t, map[string]string{"COUNTERSIGN_DATA": dir}, "account", "list"); code != 0 || strings.Contains(out, "acme") {
		t.Errorf("account list of the data directory: %d %q", code, out)
	}
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	want := regexp.MustCompile(`schema version (\d+)\n$`)
	dir := t.TempDir()
	code, out, errOut := runCLI(t, nil, "migrate", "--data", dir)
	m := want.FindStringSubmatch(out)
	if code != 0 || m == nil || !strings.HasPrefix(out, "SQLite "+filepath.Join(dir, "countersign.db")) {
		t.Fatalf("migrate of a data directory: %d %q %q", code, out, errOut)
	}
	store, err := openStore(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := store.(schemaVersioner).SchemaVersion(t.Context())
	store.Close()
	if err != nil || fmt.Sprint(v) != m[1] {
		t.Errorf("migrate reported version %s, the store has %d (%v)", m[1], v, err)
	}

	url := pgtest.SchemaURL(t)
	keyFile := newKeyFile(t)
	for range 2 { // the second run has nothing to apply
		code, out, errOut := runCLI(t, nil, "migrate", "--database-url", url, "--secret-key-file", keyFile)
		if code != 0 || !strings.HasPrefix(out, "PostgreSQL ") || !strings.HasSuffix(out, fmt.Sprintf(": schema version %d\n", postgres.Latest())) {
			t.Fatalf("migrate of a database: %d %q %q", code, out, errOut)
		}
		if strings.Contains(out+errOut, "search_path") {
			t.Errorf("migrate shows the URL's parameters: %q", out)
		}
	}
	// A database a newer binary migrated is refused, and left as it is.
	pgtest.ExecURL(t, url, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, 0)`, postgres.Latest()+1)
	code, out, errOut = runCLI(t, nil, "migrate", "--database-url", url, "--secret-key-file", keyFile)
	wantErr := fmt.Sprintf("database schema version %d is newer than this binary (%d); upgrade countersign", postgres.Latest()+1, postgres.Latest())
	if code != 1 || !strings.Contains(errOut, wantErr) || out != "" {
		t.Errorf("migrate of a newer database: %d %q %q", code, out, errOut)
	}
}

// TestStoreCopy moves an instance with requests in every state from a data
// directory to PostgreSQL and on to another data directory: each copy's
// audit log verifies to the same head, and the credentials still work.
func TestStoreCopy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	vars := map[string]string{"COUNTERSIGN_DATA": dir}
	// The copies open with the source's key file: a PostgreSQL store
	// needs it named.
	keyFile := filepath.Join(dir, "secret.key")
	for _, args := range [][]string{
		{"account", "create", "acme"},
		{"key", "create", "--account", "acme", "--name", "laptop", "--seed-hmac"},
	} {
		if code, out, errOut := runCLI(t, vars, args...); code != 0 {
			t.Fatalf("%v: %d %q %q", args, code, out, errOut)
		}
	}
	// Requests in several states, through the service, as a server makes
	// them.
	store, err := openStore(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	admin := &identity.Admin{Store: store}
	_, secret, err := admin.CreateAgentKey(t.Context(), "acme", "ci")
	if err != nil {
		t.Fatal(err)
	}
	agent, err := (&identity.Authenticator{Store: store}).Agent(t.Context(), secret)
	if err != nil {
		t.Fatal(err)
	}
	svc := approval.New(store, nil, approval.NewHub(), approval.Config{}, nil, nil)
	for i := range 4 {
		r, _, err := svc.Create(t.Context(), agent, countersign.CreateInput{Kind: countersign.KindGeneric, Action: "deploy",
			Arguments: []byte(fmt.Sprintf(`{"n":%d}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			if _, err := svc.Cancel(t.Context(), agent, r.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	store.Close()
	code, wantHead, _ := runCLI(t, vars, "audit", "verify")
	if code != 0 || !strings.Contains(wantHead, "audit log intact: 7 entries") {
		t.Fatalf("audit verify of the source: %d %q", code, wantHead)
	}

	url := pgtest.SchemaURL(t)
	code, out, errOut := runCLI(t, nil, "store", "copy", "--from", dir, "--to", url)
	if code != 0 || !strings.Contains(errOut, "sealed with the key file "+keyFile) || !strings.Contains(out, "1 accounts, 0 approvers, 0 memberships, 2 agent keys") ||
		!strings.Contains(out, "4 requests") || !strings.Contains(out, "7 audit entries") ||
		!strings.Contains(out, "audit log intact on the copy: 7 entries") {
		t.Fatalf("store copy to PostgreSQL: %d %q %q", code, out, errOut)
	}
	if strings.Contains(out, "search_path") {
		t.Errorf("store copy shows the URL's parameters: %q", out)
	}
	if code, got, _ := runCLI(t, nil, "audit", "verify", "--database-url", url, "--secret-key-file", keyFile); code != 0 || got != wantHead {
		t.Errorf("audit verify of the copy: %d %q, want %q", code, got, wantHead)
	}
	// The agent key still authenticates on the copy.
	pg, err := openDatabase(t.Context(), url, storeKey{path: keyFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := (&identity.Authenticator{Store: pg}).Agent(t.Context(), secret); err != nil || got.KeyID != agent.KeyID {
		t.Errorf("the agent key on the copy: %+v, %v", got, err)
	}
	pg.Close()

	// A second copy into the same database is refused.
	code, out, errOut = runCLI(t, nil, "store", "copy", "--from", dir, "--to", url)
	if code != 1 || !strings.Contains(errOut, "the target store is not empty") {
		t.Errorf("store copy into a full database: %d %q %q", code, out, errOut)
	}
	// And back to a new data directory.
	back := filepath.Join(t.TempDir(), "back")
	if code, out, errOut := runCLI(t, nil, "store", "copy", "--from", url, "--to", back, "--secret-key-file", keyFile); code != 0 || !strings.Contains(out, "audit log intact on the copy: 7 entries") {
		t.Fatalf("store copy to SQLite: %d %q %q", code, out, errOut)
	}
	if code, got, _ := runCLI(t, map[string]string{"COUNTERSIGN_DATA": back, keyFileEnv: keyFile}, "audit", "verify"); code != 0 || got != wantHead {
		t.Errorf("audit verify of the copy back: %d %q, want %q", code, got, wantHead)
	}

	// Mistakes change nothing.
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tt := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"store", "copy", "--from", missing, "--to", filepath.Join(t.TempDir(), "x")}, 1, "holds no countersign store"},
		{[]string{"store", "copy", "--from", dir, "--to", dir}, 2, "name the same store"},
		{[]string{"store", "copy", "--from", dir}, 2, "countersign store copy --from DIR-OR-URL --to DIR-OR-URL"},
		{[]string{"store", "move"}, 2, `unknown subcommand "move"`},
	} {
		code, out, errOut := runCLI(t, nil, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.err) || out != "" {
			t.Errorf("%q: %d %q %q; want %d and %q", tt.args, code, out, errOut, tt.code, tt.err)
		}
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("copying from a missing directory created it: %v", err)
	}
}

// TestDataDirTightenedOnEveryStart: a data directory that became open to
// others is closed again by the next command that opens it, an
// administration command or the server, and the change is said.
func TestDataDirTightenedOnEveryStart(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	db := filepath.Join(dir, "countersign.db")
	if code, _, errOut := runCLI(t, nil, "account", "create", "acme", "--data", dir); code != 0 {
		t.Fatalf("account create: %d %s", code, errOut)
	}
	open := func() {
		t.Helper()
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(db, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wantTight := func(what string) {
		t.Helper()
		for path, want := range map[string]os.FileMode{dir: 0o700, db: 0o600} {
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
				t.Errorf("%s: %s is %v (%v), want %04o", what, path, fi.Mode().Perm(), err, want)
			}
		}
	}

	open()
	code, out, errOut := runCLI(t, nil, "account", "list", "--data", dir)
	if code != 0 || !strings.Contains(out, "acme") {
		t.Fatalf("account list: %d %q %q", code, out, errOut)
	}
	wantTight("account list")
	for _, want := range []string{"level=WARN", "the data directory was open to other users: made it 0700", "mode=0777", "file=countersign.db mode=0644"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("account list does not say %q:\n%s", want, errOut)
		}
	}

	open()
	logs := &testutil.LogBuffer{}
	_, _, closeStore, err := openServeStore(t.Context(), dir, "", storeKey{}, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	closeStore()
	wantTight("serve")
	if !strings.Contains(logs.String(), "made it 0700") || !strings.Contains(logs.String(), "file=countersign.db mode=0644") {
		t.Errorf("serve does not log the changes:\n%s", logs)
	}
}
