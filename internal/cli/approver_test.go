package cli

import (
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
)

// TestApproverPasswdRemove covers the life of an approver from the command
// line: a new password works and ends the old sessions; removal from one
// account ends what it had there; removal everywhere ends the rest.
func TestApproverPasswdRemove(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run := func(stdin string, args ...string) (int, string) {
		env, stdout, stderr := testEnv(map[string]string{"COUNTERSIGN_DATA": dir})
		env.Stdin = strings.NewReader(stdin)
		code := Run(t.Context(), env, args)
		return code, stdout.String() + stderr.String()
	}
	for _, args := range [][]string{
		{"account", "create", "one"}, {"account", "create", "two"},
	} {
		if code, out := run("", args...); code != 0 {
			t.Fatalf("%v: %d %s", args, code, out)
		}
	}
	if code, out := run("first-password\n", "approver", "create", "--account", "one", "--username", "ann", "--password-stdin"); code != 0 {
		t.Fatalf("approver create: %d %s", code, out)
	}
	if code, out := run("", "approver", "create", "--account", "two", "--username", "ann"); code != 0 {
		t.Fatalf("approver create in a second account: %d %s", code, out)
	}

	store, err := openStore(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	sessions := &identity.Sessions{Store: store, Clock: countersign.SystemClock{}}
	oldID, _, err := sessions.SignIn(t.Context(), "ann", "first-password", "192.0.2.1", "test")
	if err != nil {
		t.Fatalf("sign in with the first password: %v", err)
	}

	if code, out := run("second-password\n", "approver", "passwd", "--username", "ann", "--password-stdin"); code != 0 || !strings.Contains(out, "sessions have ended") {
		t.Fatalf("approver passwd: %d %s", code, out)
	}
	if _, _, err := sessions.Session(t.Context(), oldID); countersign.ErrorCode(err) != countersign.ENOTFOUND {
		t.Fatalf("session after passwd: %v, want not found", err)
	}
	if _, err := signIn(t, sessions, "first-password"); err == nil {
		t.Fatal("the old password still signs in")
	}
	id, err := signIn(t, sessions, "second-password")
	if err != nil {
		t.Fatalf("sign in with the new password: %v", err)
	}
	if code, out := run("", "approver", "passwd", "--username", "ann", "--password-stdin"); code != 1 {
		t.Fatalf("approver passwd with an empty password: %d %s", code, out)
	}

	// The session opened in account one; leaving account one ends it.
	if code, out := run("", "approver", "remove", "--username", "ann", "--account", "one"); code != 0 {
		t.Fatalf("approver remove --account one: %d %s", code, out)
	}
	if _, _, err := sessions.Session(t.Context(), id); countersign.ErrorCode(err) != countersign.ENOTFOUND {
		t.Fatalf("session in the account left: %v, want not found", err)
	}
	if code, out := run("", "approver", "remove", "--username", "ann"); code != 0 {
		t.Fatalf("approver remove: %d %s", code, out)
	}
	if _, err := store.ApproverByUsername(t.Context(), "ann"); countersign.ErrorCode(err) != countersign.ENOTFOUND {
		t.Fatalf("approver after remove: %v", err)
	}
	if code, _ := run("", "approver", "remove", "--username", "ann"); code != 1 {
		t.Fatalf("removing a removed approver exited %d, want 1", code)
	}
}

func signIn(t *testing.T, s *identity.Sessions, password string) (string, error) {
	id, _, err := s.SignIn(t.Context(), "ann", password, "192.0.2.1", "test")
	return id, err
}

// TestTokenListRevoke: a revoked approver token stops authenticating.
func TestTokenListRevoke(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run := func(stdin string, args ...string) (int, string) {
		env, stdout, stderr := testEnv(map[string]string{"COUNTERSIGN_DATA": dir})
		env.Stdin = strings.NewReader(stdin)
		code := Run(t.Context(), env, args)
		return code, stdout.String() + stderr.String()
	}
	run("", "account", "create", "one")
	if code, out := run("a-long-password\n", "approver", "create", "--account", "one", "--username", "ann", "--password-stdin"); code != 0 {
		t.Fatalf("approver create: %d %s", code, out)
	}
	code, out := run("", "token", "create", "--approver", "ann", "--name", "phone")
	if code != 0 {
		t.Fatalf("token create: %d %s", code, out)
	}
	secret := strings.TrimSpace(strings.Split(strings.Split(out, "\n\n")[1], "\n")[0])

	store, err := openStore(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	auth := &identity.Authenticator{Store: store}
	if _, err := auth.Approver(t.Context(), secret); err != nil {
		t.Fatalf("the new token: %v", err)
	}
	if code, out := run("", "token", "list", "--approver", "ann"); code != 0 || !strings.Contains(out, "phone") || !strings.Contains(out, "active") {
		t.Fatalf("token list: %d %s", code, out)
	}
	if code, out := run("", "token", "revoke", "--approver", "ann", "phone"); code != 0 {
		t.Fatalf("token revoke: %d %s", code, out)
	}
	if _, err := auth.Approver(t.Context(), secret); countersign.ErrorCode(err) != countersign.EUNAUTHORIZED {
		t.Fatalf("the revoked token: %v, want unauthorized", err)
	}
	if code, out := run("", "token", "list", "--approver", "ann"); code != 0 || !strings.Contains(out, "revoked") {
		t.Fatalf("token list after revoke: %d %s", code, out)
	}
	if code, _ := run("", "token", "revoke", "--approver", "ann", "phone"); code != 1 {
		t.Fatalf("revoking again exited %d, want 1", code)
	}
}

// TestApproverCreateGeneratesPassword: without --password-stdin, a new
// approver gets a generated password, printed once, that signs in and is
// stored only as a hash; adding the approver to a second account prints
// none.
func TestApproverCreateGeneratesPassword(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run := func(args ...string) string {
		env, stdout, stderr := testEnv(map[string]string{"COUNTERSIGN_DATA": dir})
		if code := Run(t.Context(), env, args); code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, stdout, stderr)
		}
		return stdout.String()
	}
	run("account", "create", "one")
	run("account", "create", "two")
	out := run("approver", "create", "--account", "one", "--username", "bo")
	_, password, ok := strings.Cut(out, "password (shown once): ")
	password = strings.TrimSpace(password)
	if !ok || len(password) != 23 {
		t.Fatalf("approver create printed no generated password:\n%s", out)
	}
	if out := run("approver", "create", "--account", "two", "--username", "bo"); strings.Contains(out, "password") {
		t.Errorf("adding the approver to a second account printed a password:\n%s", out)
	}

	store, err := openStore(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ap, err := store.ApproverByUsername(t.Context(), "bo")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ap.PasswordHash, "$argon2id$") || strings.Contains(ap.PasswordHash, password) {
		t.Errorf("the stored password is not an argon2id hash of it: %q", ap.PasswordHash)
	}
	sessions := &identity.Sessions{Store: store, Clock: countersign.SystemClock{}}
	if _, _, err := sessions.SignIn(t.Context(), "bo", password, "192.0.2.1", "test"); err != nil {
		t.Errorf("the generated password does not sign in: %v", err)
	}
}
