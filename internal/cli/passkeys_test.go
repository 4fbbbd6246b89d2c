package cli

import (
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
)

// TestApproverPasskeys is the recovery of passkeys on the server: the
// password turns off only for an approver with a passkey, passkeys are
// listed and removed, an enrolment link adds a new one, and a password
// comes back with passwd.
func TestApproverPasskeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run := func(vars map[string]string, args ...string) (int, string) {
		all := map[string]string{"COUNTERSIGN_DATA": dir}
		for k, v := range vars {
			all[k] = v
		}
		env, stdout, stderr := testEnv(all)
		code := Run(t.Context(), env, args)
		return code, stdout.String() + stderr.String()
	}
	if code, out := run(nil, "account", "create", "one"); code != 0 {
		t.Fatalf("account create: %d %s", code, out)
	}
	if code, out := run(nil, "approver", "create", "--account", "one", "--username", "ann"); code != 0 {
		t.Fatalf("approver create: %d %s", code, out)
	}
	if code, out := run(nil, "approver", "passwd", "--username", "ann", "--disable"); code == 0 || !strings.Contains(out, "has no passkey") {
		t.Fatalf("passwd --disable without a passkey: %d %s", code, out)
	}

	store, err := openStore(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ann, err := store.ApproverByUsername(t.Context(), "ann")
	if err != nil || ann.PasswordHash == "" {
		t.Fatalf("the refused --disable changed the password: %v", err)
	}
	if err := store.CreatePasskey(t.Context(), &countersign.Passkey{ApproverID: ann.ID, CredentialID: []byte{1, 2, 3},
		PublicKey: []byte{1}, Name: "laptop", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if code, out := run(nil, "approver", "passwd", "--username", "ann", "--disable"); code != 0 || !strings.Contains(out, "signs in only with its 1 passkeys") {
		t.Fatalf("passwd --disable: %d %s", code, out)
	}
	if ann, _ = store.ApproverByUsername(t.Context(), "ann"); ann.PasswordHash != "" {
		t.Fatal("--disable left a password")
	}
	code, out := run(nil, "approver", "passkeys", "--username", "ann")
	if code != 0 || !strings.Contains(out, "1 passkeys, password off") || !strings.Contains(out, "laptop") || !strings.Contains(out, "never used") ||
		!strings.Contains(out, "credential AQID") {
		t.Fatalf("approver passkeys: %d %s", code, out)
	}

	// An enrolment link needs the public URL; it names the approver.
	if code, out := run(nil, "approver", "enrol", "--username", "ann"); code != 2 || !strings.Contains(out, "COUNTERSIGN_PUBLIC_URL") {
		t.Fatalf("enrol without a public URL: %d %s", code, out)
	}
	code, out = run(map[string]string{"COUNTERSIGN_PUBLIC_URL": "https://approve.example.com"}, "approver", "enrol", "--username", "ann")
	link := regexp.MustCompile(`https://approve\.example\.com/enrol/(cse_\S+)`).FindStringSubmatch(out)
	if code != 0 || link == nil {
		t.Fatalf("approver enrol: %d %s", code, out)
	}
	pk, err := identity.NewPasskeys(store, nil, nil, &url.URL{Scheme: "https", Host: "approve.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if who, err := pk.Enrolment(t.Context(), link[1]); err != nil || who.ID != ann.ID {
		t.Fatalf("the printed link's token: %v, %v", who, err)
	}

	if code, out := run(nil, "approver", "passkeys", "--username", "ann", "--remove", "laptop"); code != 0 || !strings.Contains(out, "removed passkey laptop") {
		t.Fatalf("passkeys --remove: %d %s", code, out)
	}
	if code, out := run(nil, "approver", "passkeys", "--username", "ann", "--remove", "laptop"); code == 0 {
		t.Fatalf("removing it again: %d %s", code, out)
	}
	if code, out := run(nil, "approver", "passwd", "--username", "ann"); code != 0 || !strings.Contains(out, "password (shown once)") {
		t.Fatalf("a password back: %d %s", code, out)
	}
}

// TestServeStepUp: the step-up setting is checked at start; a policy the
// operator chose needs a public URL that can carry passkeys, while the
// default turns itself off on an IP address.
func TestServeStepUp(t *testing.T) {
	t.Parallel()
	parse := func(v string) (*serveConfig, error) {
		env, _, _ := testEnv(map[string]string{"COUNTERSIGN_STEP_UP": v, "COUNTERSIGN_DATA": t.TempDir()})
		return parseServe(env, nil)
	}
	if _, err := parse("kind=disk"); err == nil || !strings.Contains(err.Error(), "COUNTERSIGN_STEP_UP") {
		t.Fatalf("a bad step-up rule: %v", err)
	}
	ip, _ := url.Parse("http://127.0.0.1:8080")
	host, _ := url.Parse("http://localhost:8080")
	chosen, err := parse("kind=tool,tool=Bash")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stepUpPolicy(chosen, ip, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("a chosen step-up policy started on an IP address, where no passkey can meet it")
	}
	if p, err := stepUpPolicy(chosen, host, slog.New(slog.DiscardHandler)); err != nil || len(p.Rules) != 1 {
		t.Fatalf("a chosen policy on a host name: %+v, %v", p, err)
	}
	def, err := parse("")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := stepUpPolicy(def, ip, slog.New(slog.DiscardHandler)); err != nil || p.Active() {
		t.Fatalf("the default policy on an IP address: %+v, %v; want off", p, err)
	}
	if p, err := stepUpPolicy(def, host, slog.New(slog.DiscardHandler)); err != nil || !p.Windows || len(p.Rules) != 3 {
		t.Fatalf("the default policy on a host name: %+v, %v", p, err)
	}
}
