package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestInvokedAsRm: the binary called through a symlink named rm takes the
// role rm, the same as `countersign rm`. With no server to ask it fails
// closed: a non-zero exit, and nothing deleted.
func TestInvokedAsRm(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	dir := t.TempDir()
	link := filepath.Join(dir, "rm")
	if err := os.Symlink(binary, link); err != nil {
		t.Fatal(err)
	}
	// A recursive delete of a tree is risky by any rule: the wrapper must
	// ask, not pass it through.
	victim := filepath.Join(dir, "project")
	precious := filepath.Join(victim, "keep-me.txt")
	if err := os.Mkdir(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(precious, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A guarded session (an agent marker is set), and nothing listens on
	// port 1: whatever the wrapper asks, it cannot get
	// an approval.
	env := b.env("COUNTERSIGN_URL=http://127.0.0.1:1", "COUNTERSIGN_KEY=csk_unused", "CLAUDECODE=1")

	check := func(name string, res result) {
		t.Helper()
		if res.code == 0 {
			t.Errorf("%s -rf %s: exit 0, want a failure without a server\nstderr: %s", name, victim, res.stderr)
		}
		if res.stderr == "" {
			t.Errorf("%s: failed without a message", name)
		}
		if data, err := os.ReadFile(precious); err != nil || string(data) != "precious\n" {
			t.Fatalf("%s deleted or changed %s without an approval: %v", name, precious, err)
		}
	}
	viaLink := runBinary(t, link, env, "-rf", victim)
	check("rm (symlink)", viaLink)
	agentLink := filepath.Join(t.TempDir(), "rm")
	if err := os.Symlink(agentBinary, agentLink); err != nil {
		t.Fatal(err)
	}
	check("rm (symlink to countersign-agent)", runBinary(t, agentLink, env, "-rf", victim))
	check("countersign-agent rm", runBinary(t, agentBinary, env, "rm", "-rf", victim))
	viaRole := b.run(env, "rm", "-rf", victim)
	check("countersign rm", viaRole)
	// The symlink is exactly the role rm.
	if viaLink != viaRole {
		t.Errorf("rm through a symlink and countersign rm differ:\nsymlink: %+v\nrole:    %+v", viaLink, viaRole)
	}
}
