package gateway_test

import (
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/testutil"
)

// TestMirrorApart: the mirror knows nothing of approvals. Neither it nor
// anything it imports is the approval service or the API's client: a call
// that needs a human goes to the confirmation (package confirm) through
// the Confirmer interface only.
func TestMirrorApart(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		testutil.Missing(t, "the go command is not on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 || !slices.Contains(deps, "github.com/countersign/countersign/internal/gateway") {
		t.Fatalf("go list -deps listed %d packages, not the gateway's: %q", len(deps), deps)
	}
	const mod = "github.com/countersign/countersign/"
	for _, banned := range []string{mod + "internal/approval", mod + "client", mod + "client/api", mod + "internal/identity"} {
		if slices.Contains(deps, banned) {
			t.Errorf("the mirror depends on %s", banned)
		}
	}
}

// TestMirrorWithoutConfirmer: a mirror given no Confirmer forwards the
// calls no human needs to approve, and lets none of the others go on: it
// fails closed.
func TestMirrorWithoutConfirmer(t *testing.T) {
	t.Parallel()
	logFile := filepath.Join(t.TempDir(), "calls.log")
	cfg := gateway.NewConfig()
	quickStop(cfg)
	cfg.Upstreams = []gateway.UpstreamConfig{fixtureUpstream(t, "notes", logFile)}
	p := gateway.PrincipalOf(countersign.Agent{KeyID: "key_1", AccountID: "acc_1", KeyName: "agent"})
	g, err := gateway.New(cfg, nil, gateway.Options{Fixed: &p, Log: testLogger(t), Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	g.Start(t.Context(), 20*time.Second)
	t.Cleanup(g.Close)
	cs := stdioConnect(t, g, clientOpts{})
	wantRan(t, call(t, cs, "read_note", map[string]any{"id": "r"}), "note r from notes")
	res := call(t, cs, "delete_note", map[string]any{"id": "d"})
	if !res.IsError || !strings.Contains(textOf(res), "delete_note did not run: nobody can approve it here") {
		t.Errorf("delete_note without a Confirmer: %q (error %v)", textOf(res), res.IsError)
	}
	if got := calls(t, logFile); slices.Contains(got, "delete_note d") {
		t.Errorf("the upstream ran delete_note: %q", got)
	}
}
