package cli

import (
	"errors"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/metrics"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/store/sqlite"
	"github.com/countersign/countersign/internal/testutil"
)

// TestListShowsHiddenCharacters: what an agent wrote reaches the
// approver's terminal through countersign list with every hidden
// character and line break shown as an escape, never acted on: an escape
// sequence that erases the line, a direction override, zero-width
// characters.
func TestListShowsHiddenCharacters(t *testing.T) {
	t.Parallel()
	w := testutil.NewWorld(t)
	ctx, token := w.Ctx, w.Token("alice", "acme")
	log := slog.New(slog.DiscardHandler)
	reg := metrics.NewRegistry()
	hub := approval.NewHub()
	svc := approval.New(w.Store, nil, hub, approval.Config{}, log, approval.NewMetrics(reg, hub))
	agent, err := w.Auth.Agent(ctx, w.KeyA)
	if err != nil {
		t.Fatal(err)
	}
	// The service refuses such an action now; a request stored before it
	// did is still listed, shown as it is.
	const action = "rm -rf / \x1b[2K\x1b[1Gharmless\a\nls \u202etxt.exe \u00ad\u200b\u2060\ufeff"
	if _, _, err := svc.Create(ctx, agent, countersign.CreateInput{Kind: countersign.KindRm, Action: action}); countersign.ErrorCode(err) != countersign.EINVALID {
		t.Fatalf("Create of a hidden action: %v, want EINVALID", err)
	}
	storeRequest(t, w, agent, &countersign.Request{Kind: countersign.KindRm, Action: action})
	srv, err := server.New(server.Config{PublicURL: &url.URL{Scheme: "http", Host: "127.0.0.1"}}, svc, w.Auth, reg, log)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)

	env, stdout, stderr := testEnv(map[string]string{"XDG_CONFIG_HOME": t.TempDir()})
	if code := Run(ctx, env, []string{"list", "--server", ts.URL, "--token", token}); code != 0 {
		t.Fatalf("list = %d: %s", code, stderr)
	}
	out := stdout.String()
	if strings.ContainsAny(out, "\x1b\a\u202e\u00ad\u200b\u2060\ufeff") || strings.Count(out, "\n") != 2 {
		t.Errorf("list passes a hidden character or a line break through:\n%q", out)
	}
	if want := `rm -rf / \x1b[2K\x1b[1Gharmless\x07\nls \u202etxt.exe \u00ad\u200b\u2060\ufeff`; !strings.Contains(out, want) {
		t.Errorf("list does not show %s:\n%s", want, out)
	}
}

// storeRequest stores r for the agent as it is, past the service's checks,
// as a request stored by an older version is.
func storeRequest(t *testing.T, w *testutil.World, agent countersign.Agent, r *countersign.Request) {
	t.Helper()
	now := w.Clock.Now()
	r.ID, r.AccountID, r.KeyID, r.KeyName = countersign.NewOrderedID("req_"), agent.AccountID, agent.KeyID, agent.KeyName
	r.Reference, r.Status, r.CreatedAt, r.ExpiresAt = countersign.NewReference(), countersign.StatusPending, now, now.Add(10*time.Minute)
	r.ArgsHash, r.PreviewHash, r.Preview = approval.Hash([]byte("{}")), approval.Hash([]byte(r.Action)), r.Action
	if _, _, err := w.Store.CreateRequest(w.Ctx, r, 0, now, countersign.AuditEvent{Event: "created", Actor: "key:" + agent.KeyID, Detail: "{}"}); err != nil {
		t.Fatal(err)
	}
}

// TestListShowsTier: countersign list shows an MCP call's tier in words,
// "unknown" for an MCP request stored without one, and "-" for the
// other kinds.
func TestListShowsTier(t *testing.T) {
	t.Parallel()
	w := testutil.NewWorld(t)
	ctx, token := w.Ctx, w.Token("alice", "acme")
	log := slog.New(slog.DiscardHandler)
	reg := metrics.NewRegistry()
	hub := approval.NewHub()
	svc := approval.New(w.Store, w.Clock, hub, approval.Config{}, log, approval.NewMetrics(reg, hub))
	agent, err := w.Auth.Agent(ctx, w.KeyA)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []countersign.CreateInput{
		{Kind: countersign.KindMCP, Action: "write_file", Tier: countersign.TierCommit, RiskReasons: []string{"tier: commit"}},
		{Kind: countersign.KindMCP, Action: "send_mail", Tier: countersign.TierExternal, RiskReasons: []string{"tier: external"}},
		{Kind: countersign.KindMCP, Action: "old_call"},
		{Kind: countersign.KindRm, Action: "rm -rf /srv/old"},
	} {
		if _, _, err := svc.Create(ctx, agent, in); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := server.New(server.Config{PublicURL: &url.URL{Scheme: "http", Host: "127.0.0.1"}}, svc, w.Auth, reg, log)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	env, stdout, stderr := testEnv(map[string]string{"XDG_CONFIG_HOME": t.TempDir()})
	if code := Run(ctx, env, []string{"list", "--server", ts.URL, "--token", token}); code != 0 {
		t.Fatalf("list = %d: %s", code, stderr)
	}
	out := stdout.String()
	for _, row := range []string{`(?m)^REF\s+STATUS\s+KIND\s+TIER\s+KEY\s+EXPIRES\s+ACTION$`,
		`\s+pending\s+mcp\s+commit\s+a\s+\S+\s+write_file\n`, `\s+pending\s+mcp\s+external\s+a\s+\S+\s+send_mail\n`,
		`\s+pending\s+mcp\s+unknown\s+a\s+\S+\s+old_call\n`, `\s+pending\s+rm\s+-\s+a\s+\S+\s+rm -rf /srv/old\n`} {
		if !regexp.MustCompile(row).MatchString(out) {
			t.Errorf("list has no row %s:\n%s", row, out)
		}
	}
}

// TestApproverConfigOpenToOthers: a config file with a token that others
// may read is refused, as ssh refuses such a key.
func TestApproverConfigOpenToOthers(t *testing.T) {
	t.Parallel()
	config := t.TempDir()
	dir := filepath.Join(config, "countersign")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "approver.toml")
	if err := os.WriteFile(path, []byte("token = \"cst_file\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	env, _, _ := testEnv(map[string]string{"XDG_CONFIG_HOME": config})
	if _, err := approverClient(env, "", ""); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a config file of mode 0644: %v, want refused", err)
	}
}

// TestRedactURL: a server URL's password never reaches a message.
func TestRedactURL(t *testing.T) {
	t.Parallel()
	if got := redactURL("http://user:s3cret@127.0.0.1:1/x"); strings.Contains(got, "s3cret") || !strings.Contains(got, "127.0.0.1:1") {
		t.Errorf("redactURL = %q", got)
	}
}

// TestAuditVerifyNeedsAStore: audit verify on a directory without a store
// fails, and makes none, instead of finding an empty log intact.
func TestAuditVerifyNeedsAStore(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "typo")
	env, stdout, stderr := testEnv(nil)
	if code := Run(t.Context(), env, []string{"audit", "verify", "--data", dir}); code == 0 || strings.Contains(stdout.String(), "intact") ||
		!strings.Contains(stderr.String(), "no countersign store") {
		t.Errorf("audit verify on %s: exit %d, stdout %q, stderr %q", dir, code, stdout, stderr)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("audit verify made %s: %v", dir, err)
	}
}

// failingWriter fails every write, as a full disk or a closed pipe does.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// TestFirstStartCannotPrint: a first start whose secrets cannot be
// printed fails, saying how to get new ones, instead of losing them
// without a word.
func TestFirstStartCannotPrint(t *testing.T) {
	t.Parallel()
	store, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "countersign.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	env, _, _ := testEnv(nil)
	env.Stdout = failingWriter{}
	if err := firstStart(t.Context(), env, store); err == nil || !strings.Contains(err.Error(), "approver passwd") {
		t.Errorf("first start with a failing stdout: %v", err)
	}
}

// TestPasswordBounds: a password shorter than 10 characters (not bytes)
// or longer than the sign-in form could send is refused.
func TestPasswordBounds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{{"account", "create", "one"}} {
		env, _, stderr := testEnv(map[string]string{"COUNTERSIGN_DATA": dir})
		if code := Run(t.Context(), env, args); code != 0 {
			t.Fatalf("%v: %s", args, stderr)
		}
	}
	for name, password := range map[string]string{
		"5 characters in 10 bytes": "ééééé",
		"2 KiB":                    strings.Repeat("x", 2048),
	} {
		env, _, stderr := testEnv(map[string]string{"COUNTERSIGN_DATA": dir})
		env.Stdin = strings.NewReader(password + "\n")
		if code := Run(t.Context(), env, []string{"approver", "create", "--account", "one", "--username", "u", "--password-stdin"}); code == 0 {
			t.Errorf("%s: accepted", name)
		} else if !strings.Contains(stderr.String(), "password must be") {
			t.Errorf("%s: %s", name, stderr)
		}
	}
}

// TestPlainRemote: plain http warns only toward another machine.
func TestPlainRemote(t *testing.T) {
	t.Parallel()
	for server, want := range map[string]bool{
		"http://127.0.0.1:8080": false, "http://localhost:8080": false, "http://[::1]:8080": false,
		"https://approve.example.com": false, "http://approve.example.com": true, "http://10.0.0.5": true,
	} {
		if got := plainRemote(server); got != want {
			t.Errorf("plainRemote(%s) = %v, want %v", server, got, want)
		}
	}
	env, _, stderr := testEnv(map[string]string{"COUNTERSIGN_TOKEN": "cst_x", "XDG_CONFIG_HOME": t.TempDir()})
	if _, err := approverClient(env, "http://approve.example.com", ""); err != nil || !strings.Contains(stderr.String(), "clear text") {
		t.Errorf("no warning for plain http to another machine: %v, %q", err, stderr)
	}
}
