//lint:file-ignore SA1019 logging is deprecated as of MCP 2026-07-28; the gateway passes it through for 2025-11-25.

package gateway

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// readTapped reads an event stream through an sseTap, a byte at a time
// from the upstream, and returns what the SDK would read and the log
// messages the tap took.
func readTapped(t *testing.T, stream string, tap taps, attribute func() attribution) (string, []string) {
	t.Helper()
	var logged []string
	tap.logged = func(p *mcp.LoggingMessageParams, a attribution) {
		logged = append(logged, p.Data.(string)+" ("+a.why+")")
	}
	got, err := io.ReadAll(newSSETap(io.NopCloser(iotest.OneByteReader(strings.NewReader(stream))), tap, attribute))
	if err != nil {
		t.Fatal(err)
	}
	return string(got), logged
}

// TestSSETapPassesStreams: an upstream's event stream reaches the SDK as
// it came (an event longer than the tap holds, CRLF lines, comments, an
// event of another type, a stream cut in a line), and its log messages
// are taken with what the stream belongs to.
func TestSSETapPassesStreams(t *testing.T) {
	result := `data: {"jsonrpc":"2.0","id":1,"result":{}}` + "\n\n"
	log := `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hello"}}`
	split := strings.Index(log, `"method"`) // data lines are joined by a newline, which JSON takes as space
	long := `data: {"jsonrpc":"2.0","id":2,"result":{"x":"` + strings.Repeat("x", maxTapEvent) + `"}}` + "\n\n"
	for _, c := range []struct {
		name, stream string
		logged       []string
	}{
		{"result", "id: 1\n" + result, nil},
		{"crlf", ": hi\r\nretry: 10\r\ndata: " + log[:split] + "\r\ndata: " + log[split:] + "\r\n\r\n", []string{"hello (" + whyStream + ")"}},
		{"long", long + "data: " + log + "\n\n" + result, []string{"hello (" + whyStream + ")"}},
		{"long line", "data: " + strings.Repeat("y", maxTapEvent+5) + "\n\n" + result, nil},
		{"other type", "event: ping\ndata: " + log + "\n\n", nil},
		{"cut", result + "data: " + log[:30], nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, logged := readTapped(t, c.stream, taps{}, func() attribution { return attribution{why: whyStream} })
			if got != c.stream {
				t.Errorf("the SDK read %d bytes, not the %d the upstream sent as they came", len(got), len(c.stream))
			}
			if strings.Join(logged, "|") != strings.Join(c.logged, "|") {
				t.Errorf("logged %q, want %q", logged, c.logged)
			}
		})
	}
}

// TestSSETapStamps: a request on the stream of an operation reaches the
// SDK stamped with the operation's token in place of what the upstream put
// there, the rest of its _meta as it came; once the operation ended, with
// why it is passed on to nobody.
func TestSSETapStamps(t *testing.T) {
	var p passthrough
	ctx, end := p.begin(context.Background(), nil, nil)
	o := operationOf(ctx)
	c := o.call.Load()
	req := `{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":` +
		`{"_meta":{"countersign/operation":"op:forged","progressToken":12345678901234567890},"messages":[],"maxTokens":1}}`
	stampOf := func(stream string) (string, string) {
		t.Helper()
		got, _ := readTapped(t, stream, taps{stamp: p.stamp}, o.attribution)
		data, ok := strings.CutPrefix(strings.TrimSuffix(got, "\n\n"), "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("the SDK read %q", got)
		}
		msg, err := jsonrpc.DecodeMessage([]byte(data))
		if err != nil {
			t.Fatal(err)
		}
		var params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		if err := json.Unmarshal(msg.(*jsonrpc.Request).Params, &params); err != nil {
			t.Fatal(err)
		}
		var stamp string
		_ = json.Unmarshal(params.Meta[stampKey], &stamp)
		return stamp, string(params.Meta["progressToken"])
	}
	stamp, token := stampOf("data: " + req + "\n\n")
	if stamp != "op:"+c.token || len(c.token) < 20 || token != "12345678901234567890" {
		t.Errorf("stamped %q (token %q), progress token %s", stamp, c.token, token)
	}
	if a := p.claim(mcp.Meta{stampKey: stamp}); a.call != c {
		t.Errorf("the stamp claims %+v", a)
	}
	token = c.token
	end()
	if stamp, _ := stampOf("data: " + req + "\n\n"); stamp != "why:"+whyEnded {
		t.Errorf("stamped %q once the operation ended", stamp)
	}
	if a := p.claim(mcp.Meta{stampKey: "op:" + token}); a.call != nil || a.why != whyEnded {
		t.Errorf("the stamp of an ended operation claims %+v", a)
	}
	if a := p.claim(mcp.Meta{stampKey: "why:anything"}); a.call != nil || a.why != whyOutside {
		t.Errorf("a made-up stamp claims %+v", a)
	}
}
