package gateway_test

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/gateway/confirm"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/countersign/countersign/internal/testutil/testserver"
)

// TestUpstreamStderrInLog: what a real upstream process of countersign
// serve writes to stderr on start reaches the server's log as an info
// record with the upstream's name, not as a line of its own that reads
// like the server's failure.
func TestUpstreamStderrInLog(t *testing.T) {
	t.Parallel()
	s := testserver.New(t, testserver.At(time.Now().UTC()), testserver.WallClock())
	var out testutil.LogBuffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	cfg := gateway.NewConfig()
	up := fixtureUpstream(t, "notes", filepath.Join(t.TempDir(), "calls.log"))
	up.Command = append([]string{"sh", "-c", `echo "Error: cannot open config" >&2; exec "$0" "$@"`}, up.Command...)
	cfg.Upstreams = []gateway.UpstreamConfig{up}
	quickStop(cfg)
	if err := cfg.ResolveKeys(s.Ctx, s.Store); err != nil {
		t.Fatal(err)
	}
	key, err := s.Store.ServerKey(s.Ctx, "mcp-request-state", 32)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := confirm.NewForServer(cfg, s.Service, s.Public, key, log)
	if err != nil {
		t.Fatal(err)
	}
	gw.Start(s.Ctx, 20*time.Second)
	t.Cleanup(gw.Close)
	want := `level=INFO msg="upstream stderr" upstream=notes line="Error: cannot open config"`
	if !testutil.Wait(func() bool { return strings.Contains(out.String(), want) }, testutil.EventuallyWithin) {
		t.Fatalf("the log lacks %s:\n%s", want, out.String())
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "Error:") {
			t.Errorf("a raw line of the upstream in the log: %q", line)
		}
	}
}
