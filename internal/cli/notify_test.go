package cli

import (
	"context"
	"encoding/json"
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
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/notify"
)

// runIn runs a command on the data directory with stdin and returns the
// exit code and both streams.
func runIn(t *testing.T, data, stdin string, args ...string) (int, string, string) {
	t.Helper()
	env, stdout, stderr := testEnv(map[string]string{"COUNTERSIGN_DATA": data, "COUNTERSIGN_PUBLIC_URL": "https://approve.example.com"})
	env.Stdin = strings.NewReader(stdin)
	code := Run(context.Background(), env, args)
	return code, stdout.String(), stderr.String()
}

func TestNotifyCommands(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	if code, _, stderr := runIn(t, data, "", "account", "create", "default"); code != 0 {
		t.Fatalf("account create: %s", stderr)
	}

	// A webhook receiver that checks the signature of the test message.
	var mu sync.Mutex
	var got []notify.WebhookBody
	secret := "a secret from stdin"
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		if r.Header.Get(notify.SignatureHeader) != notify.Sign(secret, raw) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var b notify.WebhookBody
		json.Unmarshal(raw, &b)
		mu.Lock()
		got = append(got, b)
		mu.Unlock()
	}))
	defer rcv.Close()

	code, stdout, stderr := runIn(t, data, secret+"\n", "notify", "add", "--name", "n8n", "--type", "webhook", "--url", rcv.URL+"/hook", "--secret-stdin")
	if code != 0 || !strings.Contains(stdout, "added webhook channel n8n") || strings.Contains(stdout, secret) {
		t.Fatalf("notify add = %d\n%s%s", code, stdout, stderr)
	}
	// A webhook without a secret gets one, printed once.
	code, stdout, _ = runIn(t, data, "", "notify", "add", "--name", "generated", "--type", "webhook", "--url", "http://127.0.0.1:1/x")
	if code != 0 || !strings.Contains(stdout, "whsec_") {
		t.Fatalf("notify add without a secret = %d\n%s", code, stdout)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("tk_secret_token\n"), 0o600)
	code, _, stderr = runIn(t, data, "", "notify", "add", "--name", "phone", "--type", "ntfy", "--topic", "cs-x8k2", "--secret-file", tokenFile)
	if code != 0 {
		t.Fatalf("notify add ntfy: %s", stderr)
	}
	// Mistakes change nothing and say why.
	if code, _, stderr := runIn(t, data, "", "notify", "add", "--name", "m", "--type", "email", "--smtp-host", "smtp.example.com", "--from", "a@example.com"); code != 1 || !strings.Contains(stderr, "recipients") {
		t.Errorf("bad email channel = %d, %q", code, stderr)
	}
	if code, _, stderr := runIn(t, data, "", "notify", "add", "--name", "x"); code != 2 || !strings.Contains(stderr, "--name and --type") {
		t.Errorf("notify add without a type = %d, %q", code, stderr)
	}

	code, stdout, _ = runIn(t, data, "", "notify", "list")
	if code != 0 || !strings.Contains(stdout, "n8n") || !strings.Contains(stdout, "https://ntfy.sh/cs-x8k2") ||
		strings.Contains(stdout, "/hook") || strings.Contains(stdout, "tk_secret") {
		t.Errorf("notify list = %d\n%s", code, stdout)
	}

	code, stdout, stderr = runIn(t, data, "", "notify", "test", "n8n")
	mu.Lock()
	n := len(got)
	var first notify.WebhookBody
	if n > 0 {
		first = got[0]
	}
	mu.Unlock()
	if code != 0 || n != 1 || first.Event != "test" || first.InboxURL != "https://approve.example.com/approvals" || first.Channel != "n8n" {
		t.Fatalf("notify test = %d (%s%s), received %d: %+v", code, stdout, stderr, n, first)
	}
	if code, _, stderr := runIn(t, data, "", "notify", "test", "generated"); code != 1 || !strings.Contains(stderr, "test message through generated") {
		t.Errorf("notify test of an unreachable channel = %d, %q", code, stderr)
	}

	code, stdout, _ = runIn(t, data, "", "notify", "status", "--json")
	var status []map[string]any
	if code != 0 || json.Unmarshal([]byte(stdout), &status) != nil || len(status) != 3 {
		t.Fatalf("notify status = %d\n%s", code, stdout)
	}
	code, stdout, _ = runIn(t, data, "", "notify", "status")
	if code != 0 || !strings.Contains(stdout, "PENDING") || !strings.Contains(stdout, "phone") {
		t.Errorf("notify status = %d\n%s", code, stdout)
	}

	if code, stdout, _ := runIn(t, data, "", "notify", "remove", "phone"); code != 0 || !strings.Contains(stdout, "removed channel phone") {
		t.Errorf("notify remove = %d, %s", code, stdout)
	}
	if code, _, stderr := runIn(t, data, "", "notify", "remove", "phone"); code != 1 || !strings.Contains(stderr, "not found") {
		t.Errorf("notify remove twice = %d, %q", code, stderr)
	}
}

func TestNotifyApplyAndServeFlag(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	runIn(t, data, "", "account", "create", "default")
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "hook.secret"), []byte("s3cret"), 0o600)
	path := filepath.Join(dir, "notify.toml")
	os.WriteFile(path, []byte("[[channel]]\nname = \"n8n\"\ntype = \"webhook\"\nurl = \"https://n8n.example.com/webhook/x\"\nsecret_file = \"hook.secret\"\n"), 0o600)
	code, stdout, stderr := runIn(t, data, "", "notify", "apply", path)
	if code != 0 || !strings.Contains(stdout, "1 channels created, 0 updated") {
		t.Fatalf("notify apply = %d\n%s%s", code, stdout, stderr)
	}

	// serve reads the file before it opens anything: a bad one stops it.
	env, _, _ := testEnv(map[string]string{"COUNTERSIGN_NOTIFY_CONFIG": path})
	cfg, err := parseServe(env, nil)
	if err != nil || len(cfg.notify) != 1 || cfg.notify[0].Secret != "s3cret" {
		t.Fatalf("parseServe = %+v, %v", cfg, err)
	}
	os.WriteFile(path, []byte("[[channel]]\nnme = \"x\"\n"), 0o600)
	if _, err := parseServe(env, nil); err == nil || !strings.Contains(err.Error(), "unknown keys") {
		t.Errorf("parseServe with a bad file: %v", err)
	}
}

// TestNotifyStatusShowsHiddenCharacters: the last error of a channel holds
// what a remote server answered (an SMTP server's reply, say); notify
// status shows its control characters as escapes, so that the answer
// cannot rewrite the terminal.
func TestNotifyStatusShowsHiddenCharacters(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	store, err := openStore(t.Context(), data, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	acc, err := (&identity.Admin{Store: store}).CreateAccount(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	ch, err := (&notify.Admin{Store: store}).Add(ctx, notify.Spec{Account: "default", Name: "hook", Type: countersign.ChannelWebhook,
		Settings: notify.Settings{URL: "http://127.0.0.1:9/hook"}, Secret: "whsec-" + strings.Repeat("s", 24)})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	item := countersign.OutboxItem{ID: countersign.NewID("out_"), AccountID: acc.ID, ChannelID: ch.ID, Event: "test", CreatedAt: now, NextAttemptAt: now}
	if err := store.Enqueue(ctx, []countersign.OutboxItem{item}, now); err != nil {
		t.Fatal(err)
	}
	claimed, err := store.ClaimDue(ctx, now, 1, time.Minute)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v, %d", err, len(claimed))
	}
	if err := store.MarkFailed(ctx, item.ID, claimed[0].Claim, now, time.Time{}, "send e-mail: 550 \x1b[2K\x1b[1Aall sent\u202e"); err != nil {
		t.Fatal(err)
	}
	store.Close()
	code, stdout, stderr := runIn(t, data, "", "notify", "status")
	if code != 0 || strings.ContainsAny(stdout, "\x1b\u202e") || !strings.Contains(stdout, `550 \x1b[2K\x1b[1Aall sent\u202e`) {
		t.Errorf("notify status = %d %q %q", code, stdout, stderr)
	}
}

// TestNotifyAddApprovers: --approvers names the approvers a channel tells,
// kept in its settings; a name that is no username is refused.
func TestNotifyAddApprovers(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	if code, _, stderr := runIn(t, data, "", "account", "create", "default"); code != 0 {
		t.Fatalf("account create: %s", stderr)
	}
	if code, _, stderr := runIn(t, data, "", "notify", "add", "--name", "sre", "--type", "ntfy", "--topic", "cs-sre", "--approvers", "alice,bob"); code != 0 {
		t.Fatalf("notify add --approvers: %s", stderr)
	}
	code, stdout, stderr := runIn(t, data, "", "notify", "list", "--json")
	if code != 0 || !strings.Contains(stdout, `"approvers":["alice","bob"]`) {
		t.Fatalf("notify list = %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr := runIn(t, data, "", "notify", "add", "--name", "x", "--type", "ntfy", "--topic", "cs-x", "--approvers", "Not A Name"); code != 1 || !strings.Contains(stderr, "an approver the channel names") {
		t.Errorf("a bad approver = %d, %q", code, stderr)
	}
}
