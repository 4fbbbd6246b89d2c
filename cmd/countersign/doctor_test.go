package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/store/postgres/pgtest"
	"github.com/countersign/countersign/internal/testutil"

	"github.com/jackc/pgx/v5"
)

// doctorBed is a bed for countersign doctor: no data directory, no
// settings, no rm wrapper, unless a test adds them.
func doctorBed(t *testing.T) *bed {
	t.Helper()
	b := newBed(t)
	if err := os.MkdirAll(b.home, 0o700); err != nil {
		t.Fatal(err)
	}
	return b
}

// doctorEnv is the bed's environment for doctor: PATH only the system's,
// so that no rm wrapper of the machine is found, plus extra.
func (b *bed) doctorEnv(extra ...string) []string {
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + b.home, "XDG_CONFIG_HOME=" + filepath.Join(b.home, ".config"),
		"COUNTERSIGN_DATA=" + b.data}
	return append(env, extra...)
}

// doctor runs countersign doctor and checks its exit status.
func (b *bed) doctor(env []string, wantCode int, args ...string) string {
	b.t.Helper()
	res := b.run(env, append([]string{"doctor"}, args...)...)
	if res.code != wantCode {
		b.t.Fatalf("countersign doctor %q: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, res.code, wantCode, res.stdout, res.stderr)
	}
	if m := secretRE.FindString(res.stdout + res.stderr); m != "" {
		b.t.Fatalf("countersign doctor printed a credential %q:\n%s", m, res.stdout)
	}
	return res.stdout
}

// finding is one line of doctor's output and its fix ("" for none), as
// the user reads them.
func finding(status, check, text, fix string) string {
	line := fmt.Sprintf("%-4s  %-14s %s\n", status, check, text)
	if fix != "" {
		label := "fix:"
		if status == "skip" {
			label = "to set it up:"
		}
		line += fmt.Sprintf("      %-14s %s %s\n", "", label, fix)
	}
	return line
}

// wantFinding fails unless out holds the finding, followed by exactly its
// fix (or no fix line).
func wantFinding(t *testing.T, out, status, check, text, fix string) {
	t.Helper()
	want := finding(status, check, text, fix)
	i := strings.Index(out, want)
	if i < 0 {
		t.Fatalf("doctor's output lacks\n%s\ngot:\n%s", want, out)
	}
	if rest := out[i+len(want):]; fix == "" && strings.HasPrefix(rest, "      ") {
		t.Fatalf("doctor's finding %q has a fix line it should not:\n%s", text, out)
	}
}

// closedURL is the URL of a port of 127.0.0.1 that nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// writeFile writes a file with the mode perm.
func writeFile(t *testing.T, path, text string, perm os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
}

// TestDoctorServer: doctor asks the real server's /healthz at the agents'
// URL, names where the URL came from, and says why when it cannot.
func TestDoctorServer(t *testing.T) {
	t.Parallel()
	b := doctorBed(t)
	s := b.serve()
	key := s.parseFirstStart().key
	// The agents' file, with the key in it: doctor never shows it.
	cfg := filepath.Join(b.home, ".config", "countersign", "config.toml")
	writeFile(t, cfg, fmt.Sprintf("server_url = %q\nagent_key = %q\n", s.URL, key), 0o600)

	// Beside nothing but the agents' file: the server's own checks skip,
	// and nothing fails.
	env := b.doctorEnv("COUNTERSIGN_DATA=" + filepath.Join(b.home, "none"))
	out := b.doctor(env, 0)
	wantFinding(t, out, "ok", "server", s.URL+" (from server_url in "+cfg+") answers", "")
	wantFinding(t, out, "skip", "public URL", "no server configuration here (no data directory "+filepath.Join(b.home, "none")+
		", no COUNTERSIGN_PUBLIC_URL): run doctor beside the server to check it", "")
	if !strings.HasSuffix(out, "\nno problem found\n") || strings.Contains(out, key) {
		t.Fatalf("doctor's output:\n%s", out)
	}

	closed := closedURL(t)
	out = b.doctor(append(env, "COUNTERSIGN_URL="+closed), 1)
	wantFinding(t, out, "FAIL", "server", closed+" (from COUNTERSIGN_URL) does not answer: dial tcp "+strings.TrimPrefix(closed, "http://")+
		": connect: connection refused", "start it with countersign serve, or correct COUNTERSIGN_URL")
	if !strings.HasSuffix(out, "\n1 problem found\n") {
		t.Fatalf("doctor's output:\n%s", out)
	}

	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	out = b.doctor(env, 1, "--server", other.URL)
	wantFinding(t, out, "FAIL", "server", other.URL+" answers /healthz with 404: is it a countersign server?", "correct --server to the server's own URL")

	// A password in the URL stays out of the output.
	withUser := strings.Replace(closed, "http://", "http://agent:hunter2@", 1)
	out = b.doctor(env, 1, "--server", withUser)
	if strings.Contains(out, "hunter2") {
		t.Fatalf("doctor printed the URL's password:\n%s", out)
	}

	out = b.doctor(b.doctorEnv("COUNTERSIGN_DATA="+filepath.Join(b.home, "none"), "COUNTERSIGN_CONFIG="+filepath.Join(b.home, "missing.toml")), 1)
	wantFinding(t, out, "FAIL", "server", "no server URL is configured for the agents",
		`set server_url = "https://HOST" in ~/.config/countersign/config.toml (or /etc/countersign/config.toml), or COUNTERSIGN_URL`)
}

// TestDoctorPublicURL: a public URL with a host name turns passkeys on;
// without one, step-up is off with a warning, or the server would refuse
// to start, when COUNTERSIGN_STEP_UP asks for passkeys.
func TestDoctorPublicURL(t *testing.T) {
	t.Parallel()
	b := doctorBed(t)
	forHosts := "for passkeys, set COUNTERSIGN_PUBLIC_URL to a name, such as https://approve.example.com (or http://localhost:8080 on one machine)"
	tests := []struct {
		env               []string
		code              int
		status, text, fix string
	}{
		{[]string{"COUNTERSIGN_PUBLIC_URL=https://approve.example.com"}, 1, "ok", "https://approve.example.com has a host name: passkeys and step-up are on", ""},
		{[]string{"COUNTERSIGN_PUBLIC_URL=https://approve.example.com", "COUNTERSIGN_STEP_UP=none"}, 1, "ok",
			"https://approve.example.com has a host name for passkeys; step-up is off (COUNTERSIGN_STEP_UP=none)", ""},
		{[]string{"COUNTERSIGN_PUBLIC_URL=http://127.0.0.1:8080"}, 1, "warn",
			"http://127.0.0.1:8080 has no host name: passkeys are off, so no approval needs one (step-up is off)", forHosts},
		{[]string{"COUNTERSIGN_PUBLIC_URL=http://127.0.0.1:8080", "COUNTERSIGN_STEP_UP=none"}, 1, "ok",
			"http://127.0.0.1:8080 has no host name; passkeys are off, and step-up too (COUNTERSIGN_STEP_UP=none)", ""},
		{[]string{"COUNTERSIGN_PUBLIC_URL=http://127.0.0.1:8080", "COUNTERSIGN_STEP_UP=kind=rm"}, 1, "FAIL",
			"http://127.0.0.1:8080 has no host name, and COUNTERSIGN_STEP_UP needs passkeys: the server refuses to start",
			"set COUNTERSIGN_PUBLIC_URL to a name, such as https://approve.example.com (or http://localhost:8080 on one machine)"},
	}
	for _, tc := range tests {
		// The server check fails (nothing answers there): exit 1 each.
		out := b.doctor(b.doctorEnv(tc.env...), tc.code)
		wantFinding(t, out, tc.status, "public URL", tc.text, tc.fix)
	}
}

// TestDoctorDataDir: the real data directory of a first start passes;
// each mode opened to other users fails with its chmod, and doctor
// changes no mode itself.
func TestDoctorDataDir(t *testing.T) {
	t.Parallel()
	b := doctorBed(t)
	b.mustRun(b.env("COUNTERSIGN_DATA="+b.data), "account", "create", "acme")
	key := filepath.Join(b.data, "secret.key")
	env := b.doctorEnv("COUNTERSIGN_URL=" + closedURL(t))

	out := b.doctor(env, 1)
	wantFinding(t, out, "ok", "data dir", b.data+" is 0700, its files closed to other users", "")
	wantFinding(t, out, "ok", "secret key", key+" is 0600", "")
	wantFinding(t, out, "warn", "notifications", "no channel: approvers learn of a request only in the inbox",
		"countersign notify add --name phone --type ntfy --topic TOPIC (or webhook, email; see countersign notify -h)")

	fix := fmt.Sprintf("chmod 0700 %[1]s && chmod 0600 %[1]s/*, or start countersign serve, which closes it again", b.data)
	chmod := func(path string, perm os.FileMode) {
		t.Helper()
		if err := os.Chmod(path, perm); err != nil {
			t.Fatal(err)
		}
	}
	chmod(b.data, 0o755)
	out = b.doctor(env, 1)
	wantFinding(t, out, "FAIL", "data dir", b.data+" is 0755: other users may read or swap its files", fix)
	wantFinding(t, out, "skip", "notifications", "the store is not read until the checks above pass", "")
	if st, _ := os.Stat(b.data); st.Mode().Perm() != 0o755 {
		t.Fatalf("doctor changed the data directory's mode to %04o", st.Mode().Perm())
	}
	chmod(b.data, 0o700)

	chmod(filepath.Join(b.data, "countersign.db"), 0o644)
	out = b.doctor(env, 1)
	wantFinding(t, out, "FAIL", "data dir", b.data+" is 0700, but files in it are open to other users: [countersign.db (0644)]", fix)
	chmod(filepath.Join(b.data, "countersign.db"), 0o600)

	chmod(key, 0o640)
	out = b.doctor(env, 1)
	wantFinding(t, out, "FAIL", "secret key", key+" is 0640: other users may read the key", "chmod 0600 "+key)
	wantFinding(t, out, "FAIL", "data dir", b.data+" is 0700, but files in it are open to other users: [secret.key (0640)]", fix)
	chmod(key, 0o600)

	if err := os.Rename(key, key+".moved"); err != nil {
		t.Fatal(err)
	}
	out = b.doctor(env, 1)
	wantFinding(t, out, "FAIL", "secret key", key+" is missing: the store does not open without it",
		"restore the key file from your backup (a new key cannot open this store)")
	if _, err := os.Stat(key); err == nil {
		t.Fatal("doctor made a secret key file")
	}

	none := doctorBed(t)
	out = none.doctor(none.doctorEnv("COUNTERSIGN_URL="+closedURL(t)), 1)
	wantFinding(t, out, "skip", "data dir", "no data directory at "+none.data+": run doctor beside the server, with --data or COUNTERSIGN_DATA", "")
}

// TestDoctorNotifications: doctor reads each channel's last delivery from
// the store of a real server, which delivered to a webhook that answers,
// and failed to one that does not.
func TestDoctorNotifications(t *testing.T) {
	t.Parallel()
	b := doctorBed(t)
	s := b.serve()
	key := s.parseFirstStart().key
	env := b.doctorEnv("COUNTERSIGN_URL=" + s.URL)
	out := b.doctor(env, 0)
	wantFinding(t, out, "warn", "notifications", "no channel: approvers learn of a request only in the inbox",
		"countersign notify add --name phone --type ntfy --topic TOPIC (or webhook, email; see countersign notify -h)")

	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer hook.Close()
	secret := filepath.Join(b.home, "whsec")
	writeFile(t, secret, "whsec_doctor-test-secret", 0o600)
	admin := b.env("COUNTERSIGN_DATA=" + b.data)
	b.mustRun(admin, "notify", "add", "--name", "good", "--type", "webhook", "--url", hook.URL+"/?token=tok_in_query", "--secret-file", secret)
	b.mustRun(admin, "notify", "add", "--name", "bad", "--type", "webhook", "--url", closedURL(t)+"/hook", "--secret-file", secret)

	out = b.doctor(env, 0)
	wantFinding(t, out, "warn", "notifications", "webhook channel good of account default: nothing delivered yet",
		"see it work: countersign notify test --account default good")

	s.createRequest(key, "doctor-test")
	worked := regexp.MustCompile(`(?m)^ok    notifications  webhook channel good of account default: the last delivery worked, at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\n`)
	failed := regexp.MustCompile(`(?m)^FAIL  notifications  webhook channel bad of account default: the last delivery failed, at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(1 retrying, 0 given up\)\n` +
		`                     fix: countersign notify status --account default shows the error; correct the channel, then countersign notify test --account default bad\n`)
	if !testutil.Wait(func() bool {
		out = b.run(env, "doctor").stdout
		return worked.MatchString(out) && failed.MatchString(out)
	}, testutil.EventuallyWithin) {
		t.Fatalf("doctor never saw one delivery work and one fail:\n%s", out)
	}
	out = b.doctor(env, 1)
	for _, secret := range []string{"whsec_doctor-test-secret", "tok_in_query"} {
		if strings.Contains(out, secret) {
			t.Fatalf("doctor printed %q:\n%s", secret, out)
		}
	}
}

// rmBed puts the rm wrapper, a link to the real countersign-agent, in a
// directory of its own, and returns that directory.
func rmBed(t *testing.T, b *bed) string {
	t.Helper()
	dir := filepath.Join(b.home, "countersign-bin")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(agentBinary, filepath.Join(dir, "rm")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDoctorRmWrapper: the wrapper first in PATH, guarding agent shells,
// with a real rm, passes; each way of getting it wrong fails with its fix.
func TestDoctorRmWrapper(t *testing.T) {
	t.Parallel()
	b := doctorBed(t)
	dir := rmBed(t, b)
	url := "COUNTERSIGN_URL=" + closedURL(t)
	wrapperFix := `mkdir -p ~/.local/countersign-bin && ln -sf "$(command -v countersign-agent)" ~/.local/countersign-bin/rm, ` +
		"and put ~/.local/countersign-bin first in the PATH of the agent's shells"

	out := b.doctor(append(b.doctorEnv(url), "PATH="+dir+":/usr/bin:/bin"), 1)
	wantFinding(t, out, "ok", "rm wrapper", dir+"/rm is first in PATH and guards agent shells (CLAUDECODE=1, GEMINI_CLI=1, CODEX_SANDBOX, CODEX_THREAD_ID, COPILOT_CLI=1); "+
		"a shell without a marker passes straight through, as rm --dry-run explains", "")
	realRm := "/bin/rm" // the wrapper's first choice, else /usr/bin/rm
	if _, err := os.Stat(realRm); err != nil {
		realRm = "/usr/bin/rm"
	}
	wantFinding(t, out, "ok", "real rm", realRm, "")

	out = b.doctor(append(b.doctorEnv(url), "PATH=/usr/bin:/bin:"+dir), 1)
	first := "/usr/bin/rm" // the first rm of doctorEnv's PATH
	if _, err := os.Stat(first); err != nil {
		first = "/bin/rm"
	}
	wantFinding(t, out, "FAIL", "rm wrapper", fmt.Sprintf("the wrapper %s/rm is in PATH after %s, which runs instead", dir, first),
		"put "+dir+" before "+filepath.Dir(first)+" in the PATH of the agent's shells")

	out = b.doctor(b.doctorEnv(url), 1)
	wantFinding(t, out, "skip", "rm wrapper", "the rm in PATH is "+first+": no rm wrapper is installed, so rm is not guarded", wrapperFix)

	cfg := filepath.Join(b.home, ".config", "countersign", "config.toml")
	writeFile(t, cfg, "[rm]\nreal_rm = \"/nonexistent/rm\"\n", 0o600)
	out = b.doctor(append(b.doctorEnv(url), "PATH="+dir+":/usr/bin:/bin"), 1)
	wantFinding(t, out, "FAIL", "real rm", "no real rm: stat /nonexistent/rm: no such file or directory",
		`set real_rm = "/bin/rm" (the system's rm, an absolute path) in the [rm] table of `+cfg)

	writeFile(t, cfg, "[rm]\nguard = \"never\"\n", 0o600)
	out = b.doctor(append(b.doctorEnv(url), "PATH="+dir+":/usr/bin:/bin"), 1)
	wantFinding(t, out, "FAIL", "rm wrapper", dir+`/rm is first in PATH, but guard = "never" in `+cfg+": it passes every rm through",
		`set guard = "auto" (agent shells) or "always" in the [rm] table`)
	os.Remove(cfg)

	broken := filepath.Join(b.home, "broken")
	if err := os.MkdirAll(broken, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/nonexistent/countersign-agent", filepath.Join(broken, "rm")); err != nil {
		t.Fatal(err)
	}
	out = b.doctor(append(b.doctorEnv(url), "PATH="+broken+":/usr/bin:/bin"), 1)
	wantFinding(t, out, "FAIL", "rm wrapper", broken+"/rm, first in PATH, is a link to /nonexistent/countersign-agent, which does not exist", wrapperFix)

	// countersign-agent alone: it cannot hand a question to countersign.
	alone := filepath.Join(b.home, "alone")
	if err := os.MkdirAll(alone, 0o700); err != nil {
		t.Fatal(err)
	}
	copyFile(t, agentBinary, filepath.Join(alone, "countersign-agent"), 0o755)
	if err := os.Symlink(filepath.Join(alone, "countersign-agent"), filepath.Join(alone, "rm")); err != nil {
		t.Fatal(err)
	}
	out = b.doctor(append(b.doctorEnv(url), "PATH="+alone+":/usr/bin:/bin"), 1)
	wantFinding(t, out, "FAIL", "rm wrapper", alone+"/countersign-agent asks the server through the countersign binary beside it, and "+alone+"/countersign is missing",
		"install both in one directory: go build -o "+alone+"/ ./cmd/countersign ./cmd/countersign-agent")
}

// TestDoctorHook: the hook as `countersign hook claude install` writes it
// passes; a binary that is gone, a file without the hook and a file Claude
// Code cannot read fail.
func TestDoctorHook(t *testing.T) {
	t.Parallel()
	b := doctorBed(t)
	env := b.doctorEnv("COUNTERSIGN_URL=" + closedURL(t))
	settings := filepath.Join(b.home, ".claude", "settings.json")
	b.mustRun(b.env(), "hook", "claude", "install", "--settings", settings)

	out := b.doctor(env, 1)
	wantFinding(t, out, "ok", "claude hook", "PreToolUse in "+settings+" runs "+agentBinary+" hook claude --timeout 600", "")

	b.mustRun(b.env(), "hook", "claude", "install", "--settings", settings, "--command", "/nonexistent/countersign-agent hook claude")
	out = b.doctor(env, 1)
	wantFinding(t, out, "FAIL", "claude hook", "PreToolUse in "+settings+" starts /nonexistent/countersign-agent, which does not exist",
		"countersign hook claude install --settings "+settings+" (it updates the entry in place)")

	project := filepath.Join(b.home, "project-settings.json")
	writeFile(t, project, `{"permissions": {"allow": []}}`, 0o600)
	out = b.doctor(env, 1, "--settings", project)
	wantFinding(t, out, "FAIL", "claude hook", "not installed in "+project, "countersign hook claude install --settings "+project)

	writeFile(t, project, `{"hooks": [`, 0o600)
	out = b.doctor(env, 1, "--settings", project)
	wantFinding(t, out, "FAIL", "claude hook", project+": unexpected EOF", "correct the file: Claude Code cannot read it either")

	none := doctorBed(t)
	out = none.doctor(none.doctorEnv("COUNTERSIGN_URL="+closedURL(t)), 1)
	wantFinding(t, out, "skip", "claude hook", "no Claude Code settings file ("+filepath.Join(none.home, ".claude", "settings.json")+
		", .claude/settings.json, .claude/settings.local.json)", "countersign hook claude install --settings ~/.claude/settings.json")
}

// TestDoctorMCP: doctor starts each upstream of the gateway's
// configuration as the gateway does and lists its tools: the reference
// server answers; a command that is gone and a URL nothing serves do not.
func TestDoctorMCP(t *testing.T) {
	t.Parallel()
	npm, _ := filepath.Abs(filepath.Join("..", "..", "internal", "gateway", "testdata", "npm"))
	everything := filepath.Join(npm, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	node, nodeErr := exec.LookPath("node")
	if _, err := os.Stat(everything); err != nil || nodeErr != nil {
		testutil.Missing(t, "node or the npm test peers are missing; run: npm ci --prefix internal/gateway/testdata/npm")
	}
	b := doctorBed(t)
	env := b.doctorEnv("COUNTERSIGN_URL=" + closedURL(t))
	cfg := filepath.Join(b.home, "mcp.toml")
	closed := closedURL(t)
	writeFile(t, cfg, fmt.Sprintf(`[[upstream]]
name = "every"
command = [%q, %q, "stdio"]

[[upstream]]
name = "gone"
command = ["/nonexistent/mcp-server"]

[[upstream]]
name = "remote"
url = "%s/mcp?token=tok_secret_in_url"
headers = { Authorization = "Bearer tok_secret_header" }
`, node, everything, closed), 0o600)

	out := b.doctor(env, 1, "--mcp-config", cfg)
	wantFinding(t, out, "ok", "mcp", cfg+" loads: 3 upstreams", "")
	if !regexp.MustCompile(`(?m)^ok    mcp            upstream every \(` + regexp.QuoteMeta(node) + `\) answers tools/list: \d+ tools\n`).MatchString(out) {
		t.Fatalf("doctor did not list the reference server's tools:\n%s", out)
	}
	fix := "run its command (or open its URL) by hand to see why; the gateway starts it the same way"
	if !strings.Contains(out, "FAIL  mcp            upstream gone (/nonexistent/mcp-server) does not answer tools/list: ") ||
		!strings.Contains(out, "FAIL  mcp            upstream remote ("+closed+"/mcp) does not answer tools/list: ") ||
		strings.Count(out, "fix: "+fix+"\n") != 2 {
		t.Fatalf("doctor's output for the upstreams that do not answer:\n%s", out)
	}
	for _, secret := range []string{"tok_secret_in_url", "tok_secret_header"} {
		if strings.Contains(out, secret) {
			t.Fatalf("doctor printed %q:\n%s", secret, out)
		}
	}

	writeFile(t, cfg, "[[upstream]]\nname = \"x\"\ncommand = [\"x\"]\nspeed = 3\n", 0o600)
	out = b.doctor(env, 1, "--mcp-config", cfg)
	wantFinding(t, out, "FAIL", "mcp", "the MCP gateway configuration "+cfg+" has unknown keys: [upstream.speed]",
		"correct the file: countersign serve and countersign mcp refuse it too")

	out = b.doctor(env, 1)
	wantFinding(t, out, "skip", "mcp", "no MCP gateway configuration (--mcp-config, COUNTERSIGN_MCP_CONFIG)", "")
}

// TestDoctorMCPURLSecrets: an upstream's URL with user info and a query
// that does not answer: doctor names it by scheme, host and path alone,
// in the finding and in the error it reports, however the error shows
// the URL (net/http shows it with the password as "***" and the query
// whole).
func TestDoctorMCPURLSecrets(t *testing.T) {
	t.Parallel()
	b := doctorBed(t)
	env := b.doctorEnv("COUNTERSIGN_URL=" + closedURL(t))
	cfg := filepath.Join(b.home, "mcp.toml")
	host := strings.TrimPrefix(closedURL(t), "http://")
	writeFile(t, cfg, fmt.Sprintf(`[[upstream]]
name = "remote"
url = "http://someone:pw_secret_in_url@%s/mcp?token=tok_secret_in_query#frag_secret"
`, host), 0o600)

	out := b.doctor(env, 1, "--mcp-config", cfg)
	if !strings.Contains(out, "FAIL  mcp            upstream remote (http://"+host+"/mcp) does not answer tools/list: ") {
		t.Fatalf("doctor's output for the upstream that does not answer:\n%s", out)
	}
	for _, secret := range []string{"pw_secret_in_url", "tok_secret_in_query", "frag_secret", "someone", "token="} {
		if strings.Contains(out, secret) {
			t.Errorf("doctor printed %q:\n%s", secret, out)
		}
	}
}

// TestDoctorUsage: countersign help names doctor, and doctor takes no
// argument.
func TestDoctorUsage(t *testing.T) {
	t.Parallel()
	b := doctorBed(t)
	res := b.run(b.env(), "help")
	if res.code != 0 || !strings.Contains(res.stderr, "\n  doctor    check a set-up: server, public URL, notifications, rm wrapper, hook, MCP upstreams, file modes\n") {
		t.Fatalf("countersign help: exit %d\n%s", res.code, res.stderr)
	}
	res = b.run(b.env(), "doctor", "now")
	if res.code != 2 || res.stderr != "countersign doctor: usage: unexpected argument \"now\"\n" {
		t.Fatalf("countersign doctor now: exit %d\n%s", res.code, res.stderr)
	}
}

// TestDoctorPostgres: beside a PostgreSQL store there is no data
// directory to check; the key file must be named, and the channels are
// read from the database.
func TestDoctorPostgres(t *testing.T) {
	t.Parallel()
	b := doctorBed(t)
	url := pgtest.SchemaURL(t)
	keyFile := filepath.Join(b.home, "secret.key")
	b.mustRun(b.env(), "secret-key", "create", keyFile)
	secret := filepath.Join(b.home, "whsec")
	writeFile(t, secret, "whsec_doctor-test-secret", 0o600)
	pg := b.env("COUNTERSIGN_DATABASE_URL="+url, "COUNTERSIGN_SECRET_KEY_FILE="+keyFile)
	b.mustRun(pg, "account", "create", "default")
	b.mustRun(pg,
		"notify", "add", "--name", "n8n", "--type", "webhook", "--url", "https://n8n.example.com/hook", "--secret-file", secret)
	env := b.doctorEnv("COUNTERSIGN_URL="+closedURL(t), "COUNTERSIGN_DATABASE_URL="+url)

	out := b.doctor(env, 1, "--secret-key-file", keyFile)
	where := strings.TrimPrefix(url, "postgres://")
	where = where[strings.Index(where, "@")+1:]
	where = where[:strings.Index(where, "?")]
	wantFinding(t, out, "skip", "data dir", "the store is PostgreSQL ("+where+"): no data directory", "")
	wantFinding(t, out, "ok", "secret key", keyFile+" is 0600", "")
	wantFinding(t, out, "warn", "notifications", "webhook channel n8n of account default: nothing delivered yet",
		"see it work: countersign notify test --account default n8n")
	if strings.Contains(out, "search_path") || strings.Contains(out, "whsec_") {
		t.Fatalf("doctor showed the database URL's parameters or a secret:\n%s", out)
	}

	out = b.doctor(env, 1)
	wantFinding(t, out, "FAIL", "secret key", "a PostgreSQL store needs the secret key file, and none is set",
		"set COUNTERSIGN_SECRET_KEY_FILE (or --secret-key-file) to the file every replica uses")
	wantFinding(t, out, "skip", "notifications", "the store is not read until the checks above pass", "")
}

// dirFiles is every file of a directory: its name, mode and content.
func dirFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = fi.Mode().String() + "\n" + string(b)
	}
	return files
}

// doctorUnchanged runs doctor on the data directory and fails the test
// unless every file of it is as it was: the same names, modes and bytes.
func (b *bed) doctorUnchanged(env []string, wantCode int) string {
	b.t.Helper()
	before := dirFiles(b.t, b.data)
	out := b.doctor(env, wantCode)
	after := dirFiles(b.t, b.data)
	for name, was := range before {
		if now, ok := after[name]; !ok {
			b.t.Fatalf("doctor removed %s from the data directory", name)
		} else if now != was {
			b.t.Fatalf("doctor changed %s in the data directory", name)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			b.t.Fatalf("doctor made %s in the data directory", name)
		}
	}
	return out
}

// sqliteVersion is the schema version recorded in the data directory's
// store.
func sqliteVersion(t *testing.T, data string) int {
	t.Helper()
	db := openDB(t, data)
	defer db.Close()
	var v int
	if err := db.QueryRow(`SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestDoctorOlderStore: a store another version left, older or newer, is
// neither migrated nor opened by doctor, which a new binary installed
// beside a server not yet restarted may run: every file of the data
// directory stays as it was, and the notifications check says why it did
// not read the channels. Once the store is at doctor's version, it reads
// them.
func TestDoctorOlderStore(t *testing.T) {
	t.Parallel()
	b := doctorBed(t)
	admin := b.env("COUNTERSIGN_DATA=" + b.data)
	b.mustRun(admin, "account", "create", "default")
	secret := filepath.Join(b.home, "whsec")
	writeFile(t, secret, "whsec_doctor-test-secret", 0o600)
	b.mustRun(admin, "notify", "add", "--name", "n8n", "--type", "webhook", "--url", "https://n8n.example.com/hook", "--secret-file", secret)
	known := sqliteVersion(t, b.data)

	// The store as the version before migrations/0020_outbox_oldest.sql
	// left it; what came after it is forgotten too.
	db := openDB(t, b.data)
	for _, q := range []string{`DROP TABLE teams_config`, `ALTER TABLE requests DROP COLUMN original`, `DROP INDEX requests_call`, `ALTER TABLE requests DROP COLUMN call_id`, `ALTER TABLE requests DROP COLUMN ran_at`,
		`ALTER TABLE requests DROP COLUMN ran_action`, `ALTER TABLE requests DROP COLUMN ran_args_hash`,
		`DROP TABLE votes`, `ALTER TABLE agent_keys DROP COLUMN created_by`, `ALTER TABLE memberships DROP COLUMN role`, `DROP INDEX outbox_pending_created`, `DELETE FROM schema_migrations WHERE version >= 20`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	env := b.doctorEnv("COUNTERSIGN_URL=" + closedURL(t))
	out := b.doctorUnchanged(env, 1)
	wantFinding(t, out, "ok", "data dir", b.data+" is 0700, its files closed to other users", "")
	wantFinding(t, out, "ok", "secret key", filepath.Join(b.data, "secret.key")+" is 0600", "")
	wantFinding(t, out, "warn", "notifications", fmt.Sprintf("the store is at schema 19, this binary's is %d: notifications not checked, as doctor changes nothing", known),
		"start countersign serve of this version, which upgrades the store; then run doctor again")
	if strings.Contains(out, "channel n8n") || !strings.HasSuffix(out, "\n1 problem found\n") {
		t.Fatalf("doctor's output:\n%s", out)
	}
	if v := sqliteVersion(t, b.data); v != 19 {
		t.Fatalf("after doctor the store is at schema %d, want 19", v)
	}

	// Upgraded, the store is read as before.
	b.mustRun(admin, "migrate")
	out = b.doctor(env, 1)
	wantFinding(t, out, "warn", "notifications", "webhook channel n8n of account default: nothing delivered yet",
		"see it work: countersign notify test --account default n8n")

	// A store a newer version migrated further is not opened either.
	db = openDB(t, b.data)
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)`, known+1); err != nil {
		t.Fatal(err)
	}
	db.Close()
	out = b.doctorUnchanged(env, 1)
	wantFinding(t, out, "warn", "notifications", fmt.Sprintf("the store is at schema %d, newer than this binary's %d: notifications not checked", known+1, known),
		"run the doctor of the countersign version that serves the store")
}

// pgScan runs a query returning one row on the database (and schema) of
// url and scans it into dest.
func pgScan(t *testing.T, url, sql string, dest ...any) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatalf("connect to PostgreSQL: %v", err)
	}
	defer conn.Close(t.Context())
	if err := conn.QueryRow(t.Context(), sql).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestDoctorPostgresOlderStore: doctor neither migrates nor opens a
// PostgreSQL store at another schema version than its own, nor makes one
// in an empty database; it says why it did not read the channels.
func TestDoctorPostgresOlderStore(t *testing.T) {
	t.Parallel()
	b := doctorBed(t)
	keyFile := filepath.Join(b.home, "secret.key")
	b.mustRun(b.env(), "secret-key", "create", keyFile)
	env := func(url string) []string {
		return b.doctorEnv("COUNTERSIGN_URL="+closedURL(t), "COUNTERSIGN_DATABASE_URL="+url, "COUNTERSIGN_SECRET_KEY_FILE="+keyFile)
	}
	tables := `SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema()`

	// An empty database: doctor makes no table in it.
	empty := pgtest.SchemaURL(t)
	out := b.doctor(env(empty), 1)
	wantFinding(t, out, "warn", "notifications", "the store holds no schema yet: notifications not checked, as doctor changes nothing",
		"start countersign serve, which makes it; then run doctor again")
	var n int
	if pgScan(t, empty, tables, &n); n != 0 {
		t.Fatalf("doctor made %d tables in an empty database", n)
	}

	url := pgtest.SchemaURL(t)
	pg := b.env("COUNTERSIGN_DATABASE_URL="+url, "COUNTERSIGN_SECRET_KEY_FILE="+keyFile)
	b.mustRun(pg, "account", "create", "default")
	secret := filepath.Join(b.home, "whsec")
	writeFile(t, secret, "whsec_doctor-test-secret", 0o600)
	b.mustRun(pg, "notify", "add", "--name", "n8n", "--type", "webhook", "--url", "https://n8n.example.com/hook", "--secret-file", secret)
	var known int
	pgScan(t, url, `SELECT MAX(version) FROM schema_migrations`, &known)

	// The store as the version before migrations/0020_outbox_oldest.sql
	// left it; what came after it is forgotten too.
	pgtest.ExecURL(t, url, `DROP TABLE teams_config; DROP FUNCTION countersign_teams_changed(); DROP FUNCTION countersign_credentials_changed() CASCADE; ALTER TABLE requests DROP COLUMN original; DROP INDEX requests_call; ALTER TABLE requests DROP COLUMN call_id, DROP COLUMN ran_at, DROP COLUMN ran_action, DROP COLUMN ran_args_hash; DROP TABLE votes; ALTER TABLE agent_keys DROP COLUMN created_by; ALTER TABLE memberships DROP COLUMN role; DROP INDEX outbox_pending_created; DELETE FROM schema_migrations WHERE version >= 20`)
	out = b.doctor(env(url), 1)
	wantFinding(t, out, "warn", "notifications", fmt.Sprintf("the store is at schema 19, this binary's is %d: notifications not checked, as doctor changes nothing", known),
		"start countersign serve of this version, which upgrades the store; then run doctor again")
	var version int
	var index bool
	pgScan(t, url, `SELECT (SELECT MAX(version) FROM schema_migrations), EXISTS (SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'outbox_pending_created')`,
		&version, &index)
	if version != 19 || index {
		t.Fatalf("after doctor the store is at schema %d (the index of 20 there: %v), want 19 without it", version, index)
	}

	// Upgraded, the store is read as before.
	b.mustRun(pg, "migrate")
	out = b.doctor(env(url), 1)
	wantFinding(t, out, "warn", "notifications", "webhook channel n8n of account default: nothing delivered yet",
		"see it work: countersign notify test --account default n8n")

	pgtest.ExecURL(t, url, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, 0)`, known+1)
	out = b.doctor(env(url), 1)
	wantFinding(t, out, "warn", "notifications", fmt.Sprintf("the store is at schema %d, newer than this binary's %d: notifications not checked", known+1, known),
		"run the doctor of the countersign version that serves the store")
	if pgScan(t, url, `SELECT MAX(version) FROM schema_migrations`, &version); version != known+1 {
		t.Fatalf("after doctor the store is at schema %d, want %d", version, known+1)
	}
}
