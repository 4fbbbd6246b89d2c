package gateway

import (
	"context"
	"io"
	"log/slog"
)

// Probe starts or dials one upstream as the gateway does, lists its tools
// and closes it again; it returns how many tools the upstream lists. It is
// countersign doctor's check that an upstream answers: ctx bounds it, and
// a command's stderr goes to stderr.
func Probe(ctx context.Context, cfg UpstreamConfig, stderr io.Writer) (int, error) {
	u := newUpstream(cfg, 0, slog.New(slog.DiscardHandler), stderr, upstreamHooks{changed: func() {}})
	if u.web != nil {
		defer u.web.CloseIdleConnections()
	}
	cs, err := u.connect(ctx)
	if err != nil {
		return 0, err
	}
	defer cs.Close()
	return len(u.snapshot().tools), nil
}
