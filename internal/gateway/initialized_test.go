package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestNoListChangedBeforeInitialized: a tool list that changes after the
// answer to initialize but before the client's notifications/initialized
// is not announced (the protocol allows the server nothing but pings and
// logs then); after it, it is.
func TestNoListChangedBeforeInitialized(t *testing.T) {
	t.Parallel()
	g := &Gateway{}
	s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"},
		&mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}})
	// tried says that a list_changed went through the gateway's middleware,
	// sent or dropped.
	tried := make(chan struct{}, 4)
	s.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if strings.HasSuffix(method, "/list_changed") {
				tried <- struct{}{}
			}
			return res, err
		}
	}, g.quietUntilInitialized)
	s.AddReceivingMiddleware(g.noteInitialized)

	ctx := t.Context()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	conn, err := ct.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	msgs := make(chan jsonrpc.Message, 16)
	go func() {
		for {
			m, err := conn.Read(context.Background())
			if err != nil {
				close(msgs)
				return
			}
			msgs <- m
		}
	}()
	write := func(m jsonrpc.Message) {
		t.Helper()
		if err := conn.Write(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	request := func(id int64, method, params string) {
		t.Helper()
		mid, _ := jsonrpc.MakeID(float64(id))
		write(&jsonrpc.Request{ID: mid, Method: method, Params: json.RawMessage(params)})
	}
	// next returns what the server sent next: a response's id, or a
	// notification's method.
	next := func() string {
		t.Helper()
		m, ok := <-msgs
		if !ok {
			t.Fatal("the connection ended")
		}
		switch m := m.(type) {
		case *jsonrpc.Response:
			return fmt.Sprint("response ", m.ID.Raw())
		case *jsonrpc.Request:
			return m.Method
		}
		return "?"
	}
	addTool := func(name string) {
		mcp.AddTool(s, &mcp.Tool{Name: name}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, nil
		})
	}

	request(1, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"wire","version":"1"}}`)
	if got := next(); got != "response 1" {
		t.Fatalf("initialize: %s", got)
	}
	addTool("early")
	<-tried
	request(2, "ping", `{}`)
	if got := next(); got != "response 2" {
		t.Fatalf("before notifications/initialized the server sent %s", got)
	}
	write(&jsonrpc.Request{Method: "notifications/initialized", Params: json.RawMessage(`{}`)})
	request(3, "ping", `{}`)
	if got := next(); got != "response 3" {
		t.Fatalf("ping: %s", got)
	}
	addTool("late")
	<-tried
	if got := next(); got != "notifications/tools/list_changed" {
		t.Fatalf("after notifications/initialized: %s, want the tools' list_changed", got)
	}
	if n := g.initialized.len(); n != 1 {
		t.Errorf("%d sessions recorded as initialized, want 1", n)
	}
}
