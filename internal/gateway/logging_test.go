//lint:file-ignore SA1019 logging is deprecated as of MCP 2026-07-28; the gateway passes it through for upstreams and clients of 2025-11-25.

package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/gateway/confirm"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fixtureLog logs as the fixture's tool touch does.
func fixtureLog(ctx context.Context, ss *mcp.ServerSession, level, data string) {
	ss.Log(ctx, &mcp.LoggingMessageParams{Level: mcp.LoggingLevel(level), Logger: "touch", Data: data})
}

// TestStdioLoggingAndCompletions: over stdio, the upstream's log reaches the
// client at the level it set, which reaches the upstream; completions of a
// prompt's argument come from its upstream; the capabilities announce what
// is passed through, over stdio and on /mcp.
func TestStdioLoggingAndCompletions(t *testing.T) {
	t.Parallel()
	cfg := gateway.NewConfig()
	cfg.Upstreams = []gateway.UpstreamConfig{fixtureUpstream(t, "notes", "")}
	g, err := confirm.NewForClient(cfg, clientNowhere(), testLogger(t), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	g.Start(t.Context(), 20*time.Second)
	t.Cleanup(g.Close)
	logs := make(chan string, 10)
	cs := stdioConnect(t, g, clientOpts{more: func(o *mcp.ClientOptions) {
		o.LoggingMessageHandler = func(_ context.Context, r *mcp.LoggingMessageRequest) {
			logs <- fmt.Sprintf("%s %s %v", r.Params.Level, r.Params.Logger, r.Params.Data)
		}
	}})
	caps := cs.InitializeResult().Capabilities
	if caps.Logging == nil || caps.Completions == nil || caps.Prompts == nil || caps.Resources == nil {
		t.Fatalf("capabilities %+v", caps)
	}
	if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	wantRan(t, call(t, cs, "touch", nil), "touched")
	if got := testutil.Receive(t, logs, "the log message of touch"); got != "info notes/touch readme touched" {
		t.Errorf("log %q", got)
	}
	// touch logs at info, then at debug: messages come in their order,
	// so the next touch's info message comes first unless the debug one
	// passed the level.
	wantRan(t, call(t, cs, "touch", nil), "touched")
	if got := testutil.Receive(t, logs, "the log message of the second touch"); got != "info notes/touch readme touched" {
		t.Errorf("a debug message passed a level of info: %q", got)
	}
	c, err := cs.Complete(t.Context(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "greet"},
		Argument: mcp.CompleteParamsArgument{Name: "name", Value: "al"}})
	if err != nil || strings.Join(c.Completion.Values, ",") != "alice,albert" {
		t.Errorf("complete greet: %v %v", c, err)
	}

	h := newHarness(t, nil)
	if caps := h.connect(clientOpts{}).InitializeResult().Capabilities; caps.Logging == nil || caps.Completions == nil {
		t.Errorf("/mcp capabilities %+v", caps)
	}
}

// logClient connects a client of key to /mcp (2025-11-25, which has
// logging/setLevel) that hands every log message it gets to the returned
// channel, as "level logger data".
func logClient(h *harness, key string) (*mcp.ClientSession, chan string) {
	logs := make(chan string, 64)
	cs := h.connect(clientOpts{key: key, version: "2025-11-25", more: func(o *mcp.ClientOptions) {
		o.LoggingMessageHandler = func(_ context.Context, r *mcp.LoggingMessageRequest) {
			logs <- fmt.Sprintf("%s %s %v", r.Params.Level, r.Params.Logger, r.Params.Data)
		}
	}})
	return cs, logs
}

// nextLog returns the next log message a client gets.
func nextLog(t *testing.T, logs chan string) string {
	t.Helper()
	return testutil.Receive(t, logs, "a log message")
}

const touchedInfo, touchedDebug = "info notes/touch readme touched", "debug notes/touch debug detail"

// TestMCPLogging: on /mcp, the log an upstream sends during a call reaches
// the client of the call, at the level that client set; the upstream is
// set to the most verbose level of the connected clients, and to the next
// as their sessions end.
func TestMCPLogging(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	verbose, verboseLogs := logClient(h, "agent")
	terse, terseLogs := logClient(h, "outsider")
	if caps := verbose.InitializeResult().Capabilities; caps.Logging == nil {
		t.Fatalf("/mcp announces no logging: %+v", caps)
	}
	if err := verbose.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	if err := terse.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	// The second, less verbose level does not reach the upstream.
	wantCalls(t, h.logFile, "setLevel debug")

	wantRan(t, call(t, verbose, "touch", nil), "touched")
	if got := nextLog(t, verboseLogs); got != touchedInfo {
		t.Errorf("first log %q, want %q", got, touchedInfo)
	}
	if got := nextLog(t, verboseLogs); got != touchedDebug {
		t.Errorf("second log %q, want %q", got, touchedDebug)
	}
	// At info, the debug message of the first call does not come before
	// the info message of the second.
	wantRan(t, call(t, terse, "touch", nil), "touched")
	wantRan(t, call(t, terse, "touch", nil), "touched")
	for i := range 2 {
		if got := nextLog(t, terseLogs); got != touchedInfo {
			t.Errorf("log %d at info: %q, want %q", i, got, touchedInfo)
		}
	}

	// The verbose client leaves: the upstream is set to the level of the
	// one left, then, once it leaves too, as quiet as the protocol allows.
	verbose.Close()
	eventually(t, "the upstream set to info", func() bool { return len(calls(t, h.logFile)) == 2 })
	terse.Close()
	eventually(t, "the upstream set to emergency", func() bool { return len(calls(t, h.logFile)) == 3 })
	wantCalls(t, h.logFile, "setLevel debug", "setLevel info", "setLevel emergency")
}

// TestMCPLoggingConcurrentCalls: while calls of two accounts' keys run on
// the same upstream, its log cannot be told apart by call, and neither
// client gets it; alone on the upstream, each gets its own.
func TestMCPLoggingConcurrentCalls(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	mine, myLogs := logClient(h, "agent")
	theirs, theirLogs := logClient(h, "outsider")
	for _, cs := range []*mcp.ClientSession{mine, theirs} {
		if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatal(err)
		}
	}
	// Each call of meet logs only once both run, and returns only once
	// both logged.
	results := make(chan string, 2)
	for id, cs := range map[string]*mcp.ClientSession{"mine": mine, "theirs": theirs} {
		go func() {
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "meet", Arguments: map[string]any{"id": id}})
			if err != nil {
				results <- err.Error()
				return
			}
			results <- textOf(res)
		}()
	}
	for range 2 {
		if got := <-results; got != "met" {
			t.Fatalf("meet: %q", got)
		}
	}
	// A log message passed on during meet would come before the one of
	// the next call.
	for _, c := range []struct {
		cs   *mcp.ClientSession
		logs chan string
	}{{mine, myLogs}, {theirs, theirLogs}} {
		wantRan(t, call(t, c.cs, "touch", nil), "touched")
		if got := nextLog(t, c.logs); got != touchedInfo {
			t.Errorf("log %q, want %q (the log of meet went to a client)", got, touchedInfo)
		}
	}
}

// TestMCPLoggingAfterRestart: an upstream that restarts is set again to
// the level the clients want.
func TestMCPLoggingAfterRestart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cs, logs := logClient(h, "agent")
	if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	if res := call(t, cs, "crash", nil); !res.IsError {
		t.Fatalf("crash: %q", textOf(res))
	}
	eventually(t, "the upstream back and set to debug", func() bool { return len(calls(t, h.logFile)) == 3 })
	wantCalls(t, h.logFile, "setLevel debug", "crash", "setLevel debug")
	wantRan(t, call(t, cs, "touch", nil), "touched")
	for _, want := range []string{touchedInfo, touchedDebug} {
		if got := nextLog(t, logs); got != want {
			t.Errorf("log %q, want %q", got, want)
		}
	}
}

// TestMCPLoggingHTTPUpstream: the log of an upstream over HTTP, read off
// its event streams, reaches the client of the call, at the level the
// client set with logging/setLevel or, in 2026-07-28, puts in its
// request's _meta.
func TestMCPLoggingHTTPUpstream(t *testing.T) {
	t.Parallel()
	web := httptest.NewServer(fixtureHTTP("web", ""))
	t.Cleanup(web.Close)
	h := newHarness(t, func(c *gateway.Config) {
		c.Upstreams = []gateway.UpstreamConfig{{Name: "web", URL: web.URL, Headers: map[string]string{"X-Fixture-Token": "secret"}}}
	})
	old, oldLogs := logClient(h, "agent")
	if err := old.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	wantRan(t, call(t, old, "touch", nil), "touched")
	for _, want := range []string{"info web/touch readme touched", "debug web/touch debug detail"} {
		if got := nextLog(t, oldLogs); got != want {
			t.Errorf("log %q, want %q", got, want)
		}
	}

	newLogs := make(chan string, 64)
	stateless := h.connect(clientOpts{key: "outsider", more: func(o *mcp.ClientOptions) {
		o.LoggingMessageHandler = func(_ context.Context, r *mcp.LoggingMessageRequest) {
			newLogs <- fmt.Sprintf("%s %s %v", r.Params.Level, r.Params.Logger, r.Params.Data)
		}
	}})
	for range 2 {
		res, err := stateless.CallTool(t.Context(), &mcp.CallToolParams{Name: "touch", Meta: mcp.Meta{mcp.MetaKeyLogLevel: "info"}})
		if err != nil {
			t.Fatal(err)
		}
		wantRan(t, res, "touched")
	}
	for i := range 2 {
		if got := nextLog(t, newLogs); got != "info web/touch readme touched" {
			t.Errorf("log %d at info: %q", i, got)
		}
	}
}

// TestMCPSetLevelRated: logging/setLevel reaches the upstreams, so it
// counts against the key's rate like the calls that do: a client that
// toggles its level cannot flood them.
func TestMCPSetLevelRated(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *gateway.Config) { c.Rate = 6 }) // a burst of 1
	cs, _ := logClient(h, "agent")
	h.clock.Advance(10 * time.Second) // opening the session took the token
	refused := 0
	for i := range 10 {
		level := mcp.LoggingLevel("debug")
		if i%2 == 1 {
			level = "warning"
		}
		if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: level}); err != nil {
			if !strings.Contains(err.Error(), "more than 6 calls in a minute") {
				t.Fatalf("setLevel %d: %v", i, err)
			}
			refused++
		}
	}
	if refused != 9 {
		t.Errorf("%d of 10 setLevel refused, want 9", refused)
	}
	wantCalls(t, h.logFile, "setLevel debug")
}

// TestMCPSetLevelUpstreamSilent: an upstream that never answers
// logging/setLevel holds up neither the client that set its level nor the
// next one that does.
func TestMCPSetLevelUpstreamSilent(t *testing.T) {
	gateway.SetLevelTimeout(t, 100*time.Millisecond)
	fixture := fixtureHTTP("web", "")
	release := make(chan struct{}) // at the end, before the gateway stops
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if bytes.Contains(body, []byte(`"logging/setLevel"`)) {
			select {
			case <-r.Context().Done():
			case <-release:
				http.Error(w, "gone", http.StatusServiceUnavailable)
			}
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		fixture.ServeHTTP(w, r)
	}))
	t.Cleanup(web.Close)
	h := newHarness(t, func(c *gateway.Config) {
		c.Upstreams = []gateway.UpstreamConfig{{Name: "web", URL: web.URL, Headers: map[string]string{"X-Fixture-Token": "secret"}}}
	})
	t.Cleanup(func() { close(release) })
	for _, key := range []string{"agent", "outsider"} {
		cs, _ := logClient(h, key)
		done := make(chan error, 1)
		go func() { done <- cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "debug"}) }()
		if err := testutil.Receive(t, done, key+"'s setLevel without the upstream's answer"); err != nil {
			t.Errorf("%s: setLevel: %v", key, err)
		}
	}
}
