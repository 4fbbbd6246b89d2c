package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/gateway/confirm"
)

// wireMsg is a JSON-RPC message as it is on the wire.
type wireMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		ProgressToken json.RawMessage `json:"progressToken"`
	} `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// progressCall is a tools/call with a progress token of its own.
func progressCall(id int, tool string, args map[string]any) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args, "_meta": map[string]any{"progressToken": fmt.Sprintf("tok-%d", id)}}})
	return string(b)
}

// countProgress reads messages until the response to id and returns how
// many progress notifications of its token came before it; one after it
// is never seen, and fails the next call's count.
func countProgress(t *testing.T, next func() (wireMsg, bool), id int) int {
	t.Helper()
	n := 0
	want := fmt.Sprintf(`"tok-%d"`, id)
	for {
		m, ok := next()
		if !ok {
			t.Fatalf("the stream of call %d ended before its result", id)
		}
		switch {
		case m.Method == "notifications/progress" && string(m.Params.ProgressToken) == want:
			n++
		case m.Method == "notifications/progress":
			t.Fatalf("call %d: progress of another call (%s) before its result", id, m.Params.ProgressToken)
		case string(m.ID) == fmt.Sprint(id):
			if m.Error != nil || bytes.Contains(m.Result, []byte(`"isError":true`)) {
				t.Fatalf("call %d: %s %s", id, m.Error, m.Result)
			}
			return n
		}
	}
}

// progressTools are the tools that report 5 steps and then answer at once:
// the fixture's over stdio and over HTTP, and
// @modelcontextprotocol/server-everything's.
func progressTools(t *testing.T) (upstreams []gateway.UpstreamConfig, calls []func(id int) string) {
	up := fixtureUpstream(t, "notes", "")
	dir := npmDir(t)
	every := gateway.UpstreamConfig{Name: "every", Command: []string{"node", npmServer(dir, "server-everything"), "stdio"}}
	web := httptest.NewServer(fixtureHTTP("web", ""))
	t.Cleanup(web.Close)
	webUp := gateway.UpstreamConfig{Name: "web", URL: web.URL, Headers: map[string]string{"X-Fixture-Token": "secret"}}
	return []gateway.UpstreamConfig{up, every, webUp}, []func(int) string{
		func(id int) string { return progressCall(id, "notes_burst", nil) },
		func(id int) string { return progressCall(id, "web_burst", nil) },
		func(id int) string {
			return progressCall(id, "trigger-long-running-operation", map[string]any{"duration": 0, "steps": 5})
		},
	}
}

// TestProgressOnTheWireStdio: 50 calls of a tool that reports 5 steps,
// read on the wire of the stdio gateway with no SDK on the client side:
// all 250 notifications arrive, each before its call's result.
func TestProgressOnTheWireStdio(t *testing.T) {
	t.Parallel()
	ups, tools := progressTools(t)
	send, lines := stdioWire(t, ups)
	next := func() (wireMsg, bool) {
		var m wireMsg
		if !lines.Scan() {
			return m, false
		}
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			t.Fatalf("not JSON-RPC: %q", lines.Text())
		}
		return m, true
	}
	for ti, tool := range tools {
		total := 0
		for i := 1; i <= 50; i++ {
			id := ti*100 + i
			send(tool(id))
			total += countProgress(t, next, id)
		}
		if total != 250 {
			t.Errorf("tool %d: %d progress notifications before their results, want 250", ti, total)
		}
	}
}

// stdioWire starts a stdio gateway in front of ups, past its handshake,
// with no SDK on the client side: send writes one message, lines reads
// the gateway's, one a line.
func stdioWire(t *testing.T, ups []gateway.UpstreamConfig) (send func(string), lines *bufio.Scanner) {
	t.Helper()
	cfg := gateway.NewConfig()
	cfg.Rate = 0
	cfg.Upstreams = ups
	quickStop(cfg)
	g, err := confirm.NewForClient(cfg, clientNowhere(), testLogger(t), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	g.Start(t.Context(), 20*time.Second)
	t.Cleanup(g.Close)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	go func() { g.ServeStdio(ctx, inR, outW); outW.Close() }()
	t.Cleanup(func() { cancel(); inW.Close() })
	lines = bufio.NewScanner(outR)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	send = func(s string) {
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"wire","version":"1"}}}`)
	var m wireMsg
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &m) != nil || string(m.ID) != "0" {
		t.Fatalf("initialize: %q", lines.Text())
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return send, lines
}

// TestProgressOnTheWireHTTP: the same through /mcp, read off each call's
// event stream with no SDK on the client side.
func TestProgressOnTheWireHTTP(t *testing.T) {
	t.Parallel()
	ups, tools := progressTools(t)
	h := newHarness(t, func(c *gateway.Config) { c.Rate, c.Upstreams = 0, ups })
	client := bearer(h.keys["agent"])
	session := ""
	post := func(body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", h.base+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"wire","version":"1"}}}`)
	session = resp.Header.Get("Mcp-Session-Id")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, session)
	}
	resp = post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp.Body.Close()
	for ti, tool := range tools {
		total := 0
		for i := 1; i <= 50; i++ {
			id := ti*100 + i
			resp := post(tool(id))
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("call %d: %d %s", id, resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			total += countProgress(t, sseMessages(t, resp.Body), id)
			resp.Body.Close()
		}
		if total != 250 {
			t.Errorf("tool %d: %d progress notifications before their results, want 250", ti, total)
		}
	}
}

// sseMessages reads the JSON-RPC messages of an event stream.
func sseMessages(t *testing.T, body io.Reader) func() (wireMsg, bool) {
	lines := bufio.NewScanner(body)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	return func() (wireMsg, bool) {
		var data []string
		for lines.Scan() {
			line := strings.TrimSuffix(lines.Text(), "\r")
			if after, ok := strings.CutPrefix(line, "data:"); ok {
				data = append(data, strings.TrimPrefix(after, " "))
				continue
			}
			if line == "" && len(data) > 0 {
				if strings.Join(data, "") == "" {
					data = nil // a priming event, which carries only its id
					continue
				}
				var m wireMsg
				if err := json.Unmarshal([]byte(strings.Join(data, "\n")), &m); err != nil {
					t.Fatalf("not JSON-RPC: %q", data)
				}
				return m, true
			}
		}
		return wireMsg{}, false
	}
}
