package gateway

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestUpstreamStderrInServerLog: in the server, each line an upstream
// writes to stderr is one info record of the server's log that names the
// upstream, whatever the line says; a line cut across writes is one
// record, and an endless line is cut.
func TestUpstreamStderrInServerLog(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	u := newUpstream(UpstreamConfig{Name: "fs", Command: []string{"true"}}, 0, log, nil, upstreamHooks{})
	u.command.stderr.Write([]byte("Error: cannot read /srv/x\r\nSecure MCP Filesystem "))
	u.command.stderr.Write([]byte("Server running on stdio\n" + strings.Repeat("x", 2*maxStderrLine) + "\n"))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d records, want 3:\n%s", len(lines), out.String())
	}
	for i, want := range []string{`line="Error: cannot read /srv/x"`, `line="Secure MCP Filesystem Server running on stdio"`, `(cut)"`} {
		l := lines[i]
		if !strings.Contains(l, "level=INFO") || !strings.Contains(l, `msg="upstream stderr"`) || !strings.Contains(l, "upstream=fs") || !strings.Contains(l, want) {
			t.Errorf("record %d: %s\nwant info, msg \"upstream stderr\", upstream=fs and %s", i, l, want)
		}
	}
	if len(lines[2]) > maxStderrLine+200 {
		t.Errorf("a long line was passed on whole: %d bytes", len(lines[2]))
	}
}

// TestUpstreamStderrOnWriter: the stdio gateway marks each line with the
// upstream's name.
func TestUpstreamStderrOnWriter(t *testing.T) {
	var out bytes.Buffer
	w := upstreamStderr("github", &out, slog.New(slog.DiscardHandler))
	w.Write([]byte("listening\nError: token missing\n"))
	if got, want := out.String(), "upstream github: listening\nupstream github: Error: token missing\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
