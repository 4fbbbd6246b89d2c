package cli

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/store/sqlite"
)

// testEnv is an Env with the given variables and captured streams.
func testEnv(vars map[string]string) (*Env, *bytes.Buffer, *bytes.Buffer) {
	var stdout, stderr bytes.Buffer
	return &Env{
		Stdin:  strings.NewReader(""),
		Stdout: &stdout,
		Stderr: &stderr,
		Getenv: func(k string) string { return vars[k] },
	}, &stdout, &stderr
}

func TestParseServeDefaults(t *testing.T) {
	t.Parallel()
	env, _, _ := testEnv(nil)
	cfg, err := parseServe(env, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := serveConfig{addr: "127.0.0.1:8080", data: "countersign-data", ttl: 10 * time.Minute,
		maxPending: 5, rateLimit: 1200, logLevel: "info", logFormat: "text", stepUp: approval.DefaultStepUp,
		filesTTL: 30 * time.Minute, maxLogMB: 32, retentionDays: 90}
	if !reflect.DeepEqual(*cfg, want) {
		t.Errorf("defaults %+v, want %+v", *cfg, want)
	}
}

func TestParseServeEnvAndFlags(t *testing.T) {
	t.Parallel()
	vars := map[string]string{
		"COUNTERSIGN_ADDR":            "0.0.0.0:9000",
		"COUNTERSIGN_DATA":            "/var/lib/countersign",
		"COUNTERSIGN_PUBLIC_URL":      "https://approve.example.com/",
		"COUNTERSIGN_REQUEST_TTL":     "90s",
		"COUNTERSIGN_MAX_PENDING":     "20",
		"COUNTERSIGN_RATE_LIMIT":      "0",
		"COUNTERSIGN_LOG_LEVEL":       "debug",
		"COUNTERSIGN_LOG_FORMAT":      "json",
		"COUNTERSIGN_TRUSTED_PROXIES": "10.0.0.0/8, 192.168.1.7,::1",
		"COUNTERSIGN_FILES_TTL":       "45m",
		"COUNTERSIGN_FILES_MAX_MB":    "512",
		"COUNTERSIGN_REPLICA_URL":     "http://10.0.0.5:8080",
		"COUNTERSIGN_SQLITE_LOG_MB":   "8",
		"COUNTERSIGN_RETENTION_DAYS":  "0",
		"COUNTERSIGN_CLAUDE_HOOK":     "acme",
	}
	env, _, _ := testEnv(vars)
	cfg, err := parseServe(env, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := serveConfig{addr: "0.0.0.0:9000", data: "/var/lib/countersign", publicURL: "https://approve.example.com/",
		ttl: 90 * time.Second, maxPending: 20, rateLimit: 0, logLevel: "debug", logFormat: "json", stepUp: approval.DefaultStepUp,
		filesTTL: 45 * time.Minute, filesMaxMB: 512, replicaURL: "http://10.0.0.5:8080", maxLogMB: 8, claudeHook: "acme"}
	var proxies []string
	for _, p := range cfg.proxies {
		proxies = append(proxies, p.String())
	}
	if want := []string{"10.0.0.0/8", "192.168.1.7/32", "::1/128"}; !slices.Equal(proxies, want) {
		t.Errorf("trusted proxies %q, want %q", proxies, want)
	}
	cfg.proxies = nil
	if !reflect.DeepEqual(*cfg, want) {
		t.Errorf("from the environment %+v, want %+v", *cfg, want)
	}

	// A flag wins over its variable.
	cfg, err = parseServe(env, []string{"--addr", "127.0.0.1:0", "--request-ttl", "24h", "--data", "d", "--max-pending", "1"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.addr != "127.0.0.1:0" || cfg.ttl != 24*time.Hour || cfg.data != "d" || cfg.maxPending != 1 || cfg.rateLimit != 0 {
		t.Errorf("flags over the environment: %+v", *cfg)
	}
}

func TestParseServeBadValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		vars  map[string]string
		args  []string
		wantM string // in the message
	}{
		{"ttl word", map[string]string{"COUNTERSIGN_REQUEST_TTL": "soon"}, nil, `request TTL "soon"`},
		{"ttl no unit", map[string]string{"COUNTERSIGN_REQUEST_TTL": "600"}, nil, `request TTL "600"`},
		{"ttl too short", map[string]string{"COUNTERSIGN_REQUEST_TTL": "9s"}, nil, `request TTL "9s"`},
		{"ttl too long", map[string]string{"COUNTERSIGN_REQUEST_TTL": "24h1s"}, nil, `request TTL "24h1s"`},
		{"ttl negative", map[string]string{"COUNTERSIGN_REQUEST_TTL": "-10m"}, nil, `request TTL "-10m"`},
		{"ttl flag", nil, []string{"--request-ttl", "0"}, `request TTL "0"`},
		{"addr no port", map[string]string{"COUNTERSIGN_ADDR": "127.0.0.1"}, nil, `listen address "127.0.0.1"`},
		{"addr word", map[string]string{"COUNTERSIGN_ADDR": "localhost:http-alt"}, nil, `listen address "localhost:http-alt"`},
		{"addr port too big", map[string]string{"COUNTERSIGN_ADDR": "127.0.0.1:70000"}, nil, `listen address "127.0.0.1:70000"`},
		{"addr flag", nil, []string{"--addr", "nonsense"}, `listen address "nonsense"`},
		{"public url no scheme", map[string]string{"COUNTERSIGN_PUBLIC_URL": "approve.example.com"}, nil, "COUNTERSIGN_PUBLIC_URL"},
		{"public url ftp", map[string]string{"COUNTERSIGN_PUBLIC_URL": "ftp://approve.example.com"}, nil, "must be an http or https URL"},
		{"public url no host", map[string]string{"COUNTERSIGN_PUBLIC_URL": "https://"}, nil, "must be an http or https URL"},
		{"public url query", map[string]string{"COUNTERSIGN_PUBLIC_URL": "https://a.example?x=1"}, nil, "must be an http or https URL"},
		{"public url fragment", map[string]string{"COUNTERSIGN_PUBLIC_URL": "https://a.example/#x"}, nil, "must be an http or https URL"},
		{"public url flag", nil, []string{"--public-url", "://"}, "must be an http or https URL"},
		{"max pending zero", map[string]string{"COUNTERSIGN_MAX_PENDING": "0"}, nil, `max pending "0"`},
		{"max pending word", map[string]string{"COUNTERSIGN_MAX_PENDING": "lots"}, nil, `max pending "lots"`},
		{"rate limit negative", map[string]string{"COUNTERSIGN_RATE_LIMIT": "-1"}, nil, `rate limit "-1"`},
		{"proxy word", map[string]string{"COUNTERSIGN_TRUSTED_PROXIES": "10.0.0.1,proxy.local"}, nil, `trusted proxy "proxy.local"`},
		{"proxy bad cidr", nil, []string{"--trusted-proxies", "10.0.0.0/33"}, `trusted proxy "10.0.0.0/33"`},
		{"unknown flag", nil, []string{"--port", "80"}, "flag provided but not defined: -port"},
		{"files ttl short", map[string]string{"COUNTERSIGN_FILES_TTL": "30s"}, nil, `files TTL "30s"`},
		{"files ttl word", nil, []string{"--files-ttl", "long"}, `files TTL "long"`},
		{"files space below two uploads", map[string]string{"COUNTERSIGN_FILES_MAX_MB": "39"}, nil, `files max MB "39"`},
		{"files space word", map[string]string{"COUNTERSIGN_FILES_MAX_MB": "lots"}, nil, `files max MB "lots"`},
		{"retention negative", map[string]string{"COUNTERSIGN_RETENTION_DAYS": "-1"}, nil, `retention days "-1"`},
		{"retention word", nil, []string{"--retention-days", "90d"}, `retention days "90d"`},
		{"sqlite log zero", map[string]string{"COUNTERSIGN_SQLITE_LOG_MB": "0"}, nil, `SQLite log MB "0"`},
		{"sqlite log too big", nil, []string{"--sqlite-log-mb", "65"}, `SQLite log MB "65"`},
		{"argument", nil, []string{"now"}, `unexpected argument "now"`},
		{"claude hook bare flag", nil, []string{"--claude-hook"}, "name the one account"},
		{"claude hook flag before flag", nil, []string{"--claude-hook", "--addr", "127.0.0.1:0"}, "name the one account"},
		{"claude hook empty flag", nil, []string{"--claude-hook="}, "name the one account"},
		{"claude hook boolean flag", nil, []string{"--claude-hook=true"}, "name the one account"},
		{"claude hook boolean variable", map[string]string{"COUNTERSIGN_CLAUDE_HOOK": "1"}, nil, "name the one account"},
		{"claude hook bad name", map[string]string{"COUNTERSIGN_CLAUDE_HOOK": "Acme Corp"}, nil, "account of --claude-hook"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, _, _ := testEnv(tt.vars)
			cfg, err := parseServe(env, tt.args)
			if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tt.wantM) {
				t.Errorf("parseServe = %+v, %v; want a usage error with %q", cfg, err, tt.wantM)
			}
		})
	}
}

// TestServeUsageErrorTouchesNothing: a bad setting exits 2 with a message
// before the data directory is created or a secret printed.
func TestServeUsageErrorTouchesNothing(t *testing.T) {
	t.Parallel()
	for _, vars := range []map[string]string{
		{"COUNTERSIGN_REQUEST_TTL": "soon"},
		{"COUNTERSIGN_ADDR": "127.0.0.1"},
		{"COUNTERSIGN_PUBLIC_URL": "approve.example.com"},
		{"COUNTERSIGN_LOG_LEVEL": "loud"},
		{"COUNTERSIGN_LOG_FORMAT": "xml"},
	} {
		data := filepath.Join(t.TempDir(), "data")
		vars["COUNTERSIGN_DATA"] = data
		vars["COUNTERSIGN_ADDR"] = cmp.Or(vars["COUNTERSIGN_ADDR"], "127.0.0.1:0")
		env, stdout, stderr := testEnv(vars)
		if code := Run(context.Background(), env, []string{"serve"}); code != 2 {
			t.Errorf("serve with %v: exit %d, want 2; stderr %q", vars, code, stderr)
		}
		if !strings.HasPrefix(stderr.String(), "countersign serve: usage: ") || stdout.Len() != 0 {
			t.Errorf("serve with %v: stdout %q, stderr %q", vars, stdout, stderr)
		}
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Errorf("serve with %v created the data directory (stat: %v)", vars, err)
		}
	}
}

// TestServeClaudeHookUnknownAccount: the HTTP hook serves one account,
// which must exist: a name that is no account stops the server at start,
// with a usage error, before it listens for anyone.
func TestServeClaudeHookUnknownAccount(t *testing.T) {
	t.Parallel()
	env, _, stderr := testEnv(map[string]string{"COUNTERSIGN_DATA": filepath.Join(t.TempDir(), "data"),
		"COUNTERSIGN_ADDR": "127.0.0.1:0", "COUNTERSIGN_CLAUDE_HOOK": "nobody"})
	if code := Run(context.Background(), env, []string{"serve"}); code != 2 {
		t.Errorf("exit %d, want 2; stderr %q", code, stderr)
	}
	if !strings.Contains(stderr.String(), `--claude-hook "nobody" (COUNTERSIGN_CLAUDE_HOOK): there is no such account`) {
		t.Errorf("stderr %q; want the unknown account named", stderr)
	}
}

func TestPublicURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ configured, listening, want string }{
		{"", "127.0.0.1:43210", "http://127.0.0.1:43210"},
		{"", "[::1]:8080", "http://[::1]:8080"},
		{"https://approve.example.com", "127.0.0.1:1", "https://approve.example.com"},
		{"https://approve.example.com/", "127.0.0.1:1", "https://approve.example.com"},
		{"http://10.0.0.7:8080/countersign/", "127.0.0.1:1", "http://10.0.0.7:8080/countersign"},
	}
	for _, tt := range tests {
		u, err := publicURL(tt.configured, tt.listening)
		if err != nil || u.String() != tt.want {
			t.Errorf("publicURL(%q, %q) = %v, %v; want %s", tt.configured, tt.listening, u, err, tt.want)
		}
	}
}

// TestServeTeamsConfig: a teams configuration is checked at start: a file
// with an unknown key stops the server before the data directory is made,
// and one whose rule names an approver the account does not have, or asks
// a quorum its approvers cannot reach, stops it before it listens. On a
// new data directory, that is before the first start: no secret is
// printed and no account made, so the next start with the file fixed is
// the first start.
func TestServeTeamsConfig(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ text, want string }{
		{"[[rule]]\naccount = \"default\"\napprover = [\"alice\"]\n", "unknown keys: rule.approver"},
		{"[[rule]]\naccount = \"default\"\napprovers = [\"alice\"]\n", `"alice" is not an approver of account "default"`},
		{"[[rule]]\naccount = \"default\"\nquorum = 2\n", `quorum 2 is more than the 1 approvers of account "default" who decide`},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "teams.toml")
		if err := os.WriteFile(path, []byte(tt.text), 0o600); err != nil {
			t.Fatal(err)
		}
		env, stdout, stderr := testEnv(map[string]string{"COUNTERSIGN_DATA": filepath.Join(dir, "data"),
			"COUNTERSIGN_ADDR": "127.0.0.1:0", "COUNTERSIGN_TEAMS_CONFIG": path})
		if code := Run(context.Background(), env, []string{"serve"}); code != 2 {
			t.Errorf("%q: exit %d, want 2; stderr %q", tt.text, code, stderr)
		}
		if !strings.Contains(stderr.String(), tt.want) || !strings.Contains(stderr.String(), "COUNTERSIGN_TEAMS_CONFIG") {
			t.Errorf("%q: stderr %q; want %q", tt.text, stderr, tt.want)
		}
		if out := stdout.String(); out != "" {
			t.Errorf("%q: the refused start printed %q", tt.text, out)
		}
		if data := filepath.Join(dir, "data"); exists(filepath.Join(data, "countersign.db")) {
			store, err := openStoreKey(context.Background(), data, storeKey{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			accounts, err := store.Accounts(context.Background())
			store.Close()
			if err != nil || len(accounts) != 0 {
				t.Errorf("%q: the refused start stored %d accounts (%v)", tt.text, len(accounts), err)
			}
		}
	}
}

// TestTeamsBeforeFirstStart: before the first start, the teams file is
// checked against the account "default" and the approver "admin" the
// first start makes: a rule that routes to admin is taken, one that names
// anyone else or a quorum of two is refused.
func TestTeamsBeforeFirstStart(t *testing.T) {
	t.Parallel()
	store, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "countersign.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for text, want := range map[string]string{
		"[[rule]]\naccount = \"default\"\ntool = \"deploy*\"\napprovers = [\"admin\"]\n": "",
		"[[rule]]\naccount = \"default\"\napprovers = [\"alice\"]\n":                     `"alice" is not an approver of account "default"`,
		"[[rule]]\naccount = \"default\"\nquorum = 2\n":                                  "quorum 2 is more than the 1 approvers",
		"[[rule]]\naccount = \"acme\"\n":                                                 `account "acme"`,
	} {
		path := filepath.Join(t.TempDir(), "teams.toml")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := approval.LoadTeams(path)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Resolve(t.Context(), firstStartView{store})
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
}
