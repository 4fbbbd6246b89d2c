package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/gateway/confirm"
	"github.com/countersign/countersign/internal/gctune"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkReadTier measures what the gateway adds to what it forwards
// without asking: a read-tier tool call, a resource read and a prompt get,
// with the same client and the same upstream, called directly and through
// the gateway, in one run.
//
//	go test -run '^$' -bench BenchmarkReadTier -benchtime 1s -count 5 ./internal/gateway
//
// stdio: the fixture as a stdio process; the gateway reached over an
// in-memory pipe, as a client reaches `countersign mcp` over its stdio.
// http: the fixture over streamable HTTP (a session, as an upstream of the
// 2025-11-25 protocol serves it; and stateless, as 2026-07-28 has it); the
// gateway at /mcp of the real server (stateless, with the agent key as
// bearer token) in front of the fixture's sessions.
//
// The collector runs as in the binaries, whose garbage it mostly is: above
// countersign mcp's floor for stdio, serve's for HTTP, for the direct calls
// too, since they share the process. GOGC=100 in the environment measures
// without a floor.
func BenchmarkReadTier(b *testing.B) {
	stopGC := gctune.Default(gctune.MCPFloor)
	args := map[string]any{"id": "bench"}
	ops := []struct {
		name string
		do   func(b *testing.B, cs *mcp.ClientSession) error
	}{
		{"tool", func(b *testing.B, cs *mcp.ClientSession) error {
			res, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "read_note", Arguments: args})
			if err == nil && res.IsError {
				err = fmt.Errorf("tool error %v", res.Content)
			}
			return err
		}},
		{"resource", func(b *testing.B, cs *mcp.ClientSession) error {
			_, err := cs.ReadResource(b.Context(), &mcp.ReadResourceParams{URI: "note://readme"})
			return err
		}},
		{"prompt", func(b *testing.B, cs *mcp.ClientSession) error {
			_, err := cs.GetPrompt(b.Context(), &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"name": "bench"}})
			return err
		}},
	}
	run := func(b *testing.B, cs *mcp.ClientSession) {
		b.Helper()
		for _, op := range ops {
			b.Run(op.name, func(b *testing.B) {
				if err := op.do(b, cs); err != nil { // warm up
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					if err := op.do(b, cs); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	logFile := filepath.Join(b.TempDir(), "calls.log")

	b.Run("stdio/direct", func(b *testing.B) {
		up := fixtureUpstream(b, "notes", logFile)
		cmd := commandOf(up)
		cs, err := client.Connect(b.Context(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		run(b, cs)
	})
	b.Run("stdio/gateway", func(b *testing.B) {
		cfg := gateway.NewConfig()
		cfg.Rate = 0 // the benchmark makes more calls than any agent may
		cfg.Upstreams = []gateway.UpstreamConfig{fixtureUpstream(b, "notes", logFile)}
		g, err := confirm.NewForClient(cfg, clientNowhere(), nil, io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		g.Start(b.Context(), 20*time.Second)
		defer g.Close()
		st, ct := mcp.NewInMemoryTransports()
		ss, err := g.Server().Connect(b.Context(), st, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer ss.Close()
		cs, err := client.Connect(b.Context(), ct, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		run(b, cs)
	})

	stopGC()
	defer gctune.Default(gctune.ServeFloor)()
	web := httptest.NewServer(fixtureHTTP("notes", logFile))
	defer web.Close()
	b.Run("http/direct", func(b *testing.B) {
		cs, err := client.Connect(b.Context(), &mcp.StreamableClientTransport{Endpoint: web.URL, HTTPClient: tokenClient()}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		run(b, cs)
	})
	// The same fixture served statelessly, as 2026-07-28 has it and as /mcp
	// serves new clients: what that transport costs by itself.
	fixture := fixtureServer("notes", logFile)
	stateless := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return fixture },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	defer stateless.Close()
	b.Run("http/direct-stateless", func(b *testing.B) {
		cs, err := client.Connect(b.Context(), &mcp.StreamableClientTransport{Endpoint: stateless.URL}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		run(b, cs)
	})
	b.Run("http/gateway", func(b *testing.B) {
		b.Setenv("FIXTURE_TOKEN", "secret")
		h := newHarness(b, func(c *gateway.Config) {
			c.Upstreams = []gateway.UpstreamConfig{{Name: "notes", URL: web.URL, Headers: map[string]string{"X-Fixture-Token": "${FIXTURE_TOKEN}"}}}
			c.Rate = 0
		})
		cs, err := client.Connect(b.Context(), &mcp.StreamableClientTransport{Endpoint: h.base + "/mcp", HTTPClient: bearer(h.keys["agent"])}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		run(b, cs)
	})
}

// clientNowhere is a countersign client no read-tier call ever uses.
func clientNowhere() *client.Client { return client.New("http://127.0.0.1:1", "csk_unused") }

func tokenClient() *http.Client {
	return &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("X-Fixture-Token", "secret")
		return http.DefaultTransport.RoundTrip(r)
	})}
}

// commandOf is the process of an upstream configuration.
func commandOf(u gateway.UpstreamConfig) *exec.Cmd {
	cmd := exec.Command(u.Command[0], u.Command[1:]...)
	cmd.Env = os.Environ()
	for k, v := range u.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// BenchmarkBearerCall compares a read-tier call through /mcp with an agent
// key and with an OAuth access token of a grant, on one server in one run:
// the token's check (a hashed lookup of token and grant, cached like keys
// on SQLite) must cost no more than the key's.
//
//	go test -run '^$' -bench BenchmarkBearerCall -benchtime 2s -count 5 ./internal/gateway
func BenchmarkBearerCall(b *testing.B) {
	h := newHarness(b, nil)
	token := h.grantToken(b, "read", "write")
	args := map[string]any{"id": "bench"}
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	for _, bc := range []struct{ name, secret string }{{"agent-key", h.keys["agent"]}, {"oauth-token", token}} {
		b.Run(bc.name, func(b *testing.B) {
			cs, err := client.Connect(b.Context(), &mcp.StreamableClientTransport{Endpoint: h.base + "/mcp", HTTPClient: bearer(bc.secret)}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			call(b, cs, "read_note", args) // warm up
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				res, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "read_note", Arguments: args})
				if err != nil || res.IsError {
					b.Fatalf("%v %v", err, res)
				}
			}
		})
	}
}
