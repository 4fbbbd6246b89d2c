package gateway_test

import (
	"bytes"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/gateway/confirm"
	"github.com/countersign/countersign/internal/testutil"
)

// lockedBuffer is a log's output that the test reads while the log writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestUpstreamStderrInLog: what a real upstream process of countersign
// serve writes to stderr on start reaches the server's log as an info
// record with the upstream's name, not as a line of its own that reads
// like the server's failure.
func TestUpstreamStderrInLog(t *testing.T) {
	t.Parallel()
	w := testutil.NewWorldAt(t, time.Now().UTC())
	var out lockedBuffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	cfg := gateway.NewConfig()
	up := fixtureUpstream(t, "notes", filepath.Join(t.TempDir(), "calls.log"))
	up.Command = append([]string{"sh", "-c", `echo "Error: cannot open config" >&2; exec "$0" "$@"`}, up.Command...)
	cfg.Upstreams = []gateway.UpstreamConfig{up}
	quickStop(cfg)
	if err := cfg.ResolveKeys(w.Ctx, w.Store); err != nil {
		t.Fatal(err)
	}
	hub := approval.NewHub()
	t.Cleanup(hub.Close)
	svc := approval.New(w.Store, nil, hub, approval.Config{}, nil, nil)
	key, err := w.Store.ServerKey(w.Ctx, "mcp-request-state", 32)
	if err != nil {
		t.Fatal(err)
	}
	public, _ := url.Parse("http://127.0.0.1:1")
	gw, err := confirm.NewForServer(cfg, svc, public, key, log)
	if err != nil {
		t.Fatal(err)
	}
	gw.Start(w.Ctx, 20*time.Second)
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
