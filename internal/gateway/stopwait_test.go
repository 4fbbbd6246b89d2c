package gateway

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStopWaitDefault: a command upstream has two seconds to exit once
// its stdin closes, unless a test shortens it.
func TestStopWaitDefault(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for wait, want := range map[time.Duration]time.Duration{0: 2 * time.Second, -time.Second: 2 * time.Second, 100 * time.Millisecond: 100 * time.Millisecond} {
		u := newUpstream(UpstreamConfig{Name: "u", Command: []string{"true"}}, wait, log, io.Discard, upstreamHooks{})
		tt, ok := u.transport().(*tapTransport)
		if !ok {
			t.Fatalf("transport is %T, want *tapTransport", u.transport())
		}
		ct, ok := tt.Transport.(*mcp.CommandTransport)
		if !ok {
			t.Fatalf("tapped transport is %T, want *mcp.CommandTransport", tt.Transport)
		}
		if ct.TerminateDuration != want {
			t.Errorf("stopWait %v: TerminateDuration %v, want %v", wait, ct.TerminateDuration, want)
		}
	}
}
