package cli

import (
	"strings"
	"testing"
)

// TestApproverRoles: `approver create` gives the approver role unless told
// otherwise, `approver role` changes it, `approver list` shows each
// approver's role in the account, and a role that is not one, or a change
// for a non-member, is refused and changes nothing.
func TestApproverRoles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run := func(args ...string) (int, string) {
		env, stdout, stderr := testEnv(map[string]string{"COUNTERSIGN_DATA": dir})
		env.Stdin = strings.NewReader("a long password for them\n")
		code := Run(t.Context(), env, args)
		return code, stdout.String() + stderr.String()
	}
	for _, args := range [][]string{
		{"account", "create", "one"}, {"account", "create", "two"},
		{"approver", "create", "--account", "one", "--username", "ann", "--password-stdin"},
		{"approver", "create", "--account", "one", "--username", "vic", "--role", "viewer", "--password-stdin"},
		{"approver", "create", "--account", "two", "--username", "ann", "--role", "admin"},
	} {
		if code, out := run(args...); code != 0 {
			t.Fatalf("%v: %d %s", args, code, out)
		}
	}
	list := func(account string) string {
		t.Helper()
		code, out := run("approver", "list", "--account", account)
		if code != 0 {
			t.Fatalf("approver list %s: %d %s", account, code, out)
		}
		return strings.Join(strings.Fields(out), " ")
	}
	wantRows := func(what, account string, rows ...string) {
		t.Helper()
		got := list(account)
		for _, r := range rows {
			if !strings.Contains(got, r) {
				t.Errorf("%s: approver list --account %s = %q, want a row %q", what, account, got, r)
			}
		}
	}
	wantRows("as created", "one", "ann approver", "vic viewer")
	wantRows("as created", "two", "ann admin")

	if code, out := run("approver", "role", "--account", "one", "--username", "vic", "admin"); code != 0 || !strings.Contains(out, "approver vic is an admin of account one") {
		t.Errorf("approver role: %d %q", code, out)
	}
	for name, args := range map[string][]string{
		"an unknown role":        {"approver", "role", "--account", "one", "--username", "ann", "owner"},
		"a non-member":           {"approver", "role", "--account", "two", "--username", "vic", "admin"},
		"no role":                {"approver", "role", "--account", "one", "--username", "ann"},
		"create with a bad role": {"approver", "create", "--account", "two", "--username", "vic", "--role", "root"},
	} {
		if code, out := run(args...); code == 0 {
			t.Errorf("%s: exit 0, want a refusal: %s", name, out)
		}
	}
	wantRows("after the changes", "one", "ann approver", "vic admin")
	wantRows("after the changes", "two", "ann admin")
	if got := list("two"); strings.Contains(got, "vic") {
		t.Errorf("a refused create added vic to account two: %q", got)
	}
}
