package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// editAndApprove is an approver's edit of a request through the HTTP API,
// with their API token: approve with the arguments args.
func (h *harness) editAndApprove(id string, args map[string]any) error {
	body, _ := json.Marshal(map[string]any{"decision": "approve", "edit": map[string]any{"arguments": args}})
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, h.base+"/api/v1/requests/"+id+"/decision", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+h.srv.ApproverToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var got map[string]any
	json.NewDecoder(resp.Body).Decode(&got)
	if resp.StatusCode != http.StatusOK || got["status"] != "approved" || got["edited"] != true {
		return fmt.Errorf("edit and approve: %d %v", resp.StatusCode, got)
	}
	return nil
}

// TestEditedFilesystem: @modelcontextprotocol/server-filesystem behind the
// gateway. The model asks to write one file; an approver edits the call
// in the API to write another file with other content, and approves. The
// model's retry of its own call runs the edit: the upstream writes the
// approver's file, never the model's, and the model learns what ran. The
// approval is used once; a call of the edited arguments by the model is a
// new call, asked anew.
func TestEditedFilesystem(t *testing.T) {
	t.Parallel()
	dir := npmDir(t)
	root := t.TempDir()
	h := newHarness(t, func(c *gateway.Config) {
		c.Upstreams = []gateway.UpstreamConfig{{Name: "fs", Command: []string{"node", npmServer(dir, "server-filesystem"), root}}}
	})
	cs := h.connect(clientOpts{})
	asked := map[string]any{"path": filepath.Join(root, "model.txt"), "content": "from the model"}
	edited := map[string]any{"path": filepath.Join(root, "approver.txt"), "content": "from the approver"}
	wantStatus(t, call(t, cs, "write_file", asked), "approval_pending")
	r := h.pending("write_file")
	if err := h.editAndApprove(r.ID, edited); err != nil {
		t.Fatal(err)
	}

	res := call(t, cs, "write_file", asked)
	if res.IsError || res.Meta["countersign/edited"] != true || !strings.Contains(textOf(res), "a human edited this call") ||
		!strings.Contains(textOf(res), "from the approver") {
		t.Fatalf("the retry: %q (error %v, meta %v); want the edited call run, and said so", textOf(res), res.IsError, res.Meta)
	}
	if b, err := os.ReadFile(filepath.Join(root, "approver.txt")); err != nil || string(b) != "from the approver" {
		t.Errorf("the approver's file: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(root, "model.txt")); !os.IsNotExist(err) {
		t.Errorf("the model's file was written: %v", err)
	}
	if got := h.request(r.ID); got.Status != countersign.StatusConsumed || got.Original == nil {
		t.Errorf("the request: %s, original %+v; want consumed, with the original kept", got.Status, got.Original)
	}
	// Used once: the same call again, or the edited one, is asked anew.
	wantStatus(t, call(t, cs, "write_file", asked), "approval_pending")
	wantStatus(t, call(t, cs, "write_file", edited), "approval_pending")
	if _, err := os.Stat(filepath.Join(root, "model.txt")); !os.IsNotExist(err) {
		t.Errorf("the model's file was written: %v", err)
	}
}

// TestEditedElicitation: a client sent to the inbox by a URL elicitation
// comes back after the approver edited the call there (through the API)
// and approved it; the call that goes on runs the edited arguments.
func TestEditedElicitation(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"", "2025-11-25"} {
		t.Run("v"+version, func(t *testing.T) {
			h := newHarness(t, longHold)
			cs := h.connect(clientOpts{version: version, urlOnly: true,
				elicit: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					if err := h.editAndApprove(h.pending("delete_note").ID, map[string]any{"id": "spare"}); err != nil {
						t.Error(err)
					}
					return &mcp.ElicitResult{Action: "accept"}, nil
				}})
			res := call(t, cs, "delete_note", map[string]any{"id": "precious"})
			if res.IsError || !strings.HasPrefix(textOf(res), "deleted spare") || res.Meta["countersign/edited"] != true {
				t.Fatalf("result %q (error %v, meta %v); want the edited call run", textOf(res), res.IsError, res.Meta)
			}
			wantCalls(t, h.logFile, "delete_note spare")
		})
	}
}

// TestEditedStdio: `countersign mcp` asking a server through the API (the
// stdio gateway with COUNTERSIGN_URL). An approver's edit made through the
// API is what the upstream receives when the model retries its call; the
// original call never runs.
func TestEditedStdio(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *gateway.Config) { c.Upstreams = nil })
	g, logFile := h.stdioGateway("agent")
	cs := stdioConnect(t, g, clientOpts{})
	asked := map[string]any{"id": "precious"}
	wantStatus(t, call(t, cs, "delete_note", asked), "approval_pending")
	r := h.pending("delete_note")
	if err := h.editAndApprove(r.ID, map[string]any{"id": "spare"}); err != nil {
		t.Fatal(err)
	}
	res := call(t, cs, "delete_note", asked)
	if res.IsError || !strings.HasPrefix(textOf(res), "deleted spare") || res.Meta["countersign/edited"] != true {
		t.Fatalf("result %q (error %v, meta %v); want the edited call run", textOf(res), res.IsError, res.Meta)
	}
	wantStatus(t, call(t, cs, "delete_note", asked), "approval_pending")
	wantCalls(t, logFile, "delete_note spare")
}

// TestEditedAfterRestart: the gateway that asked about a call is gone —
// countersign serve restarted (its gateway in process holds nothing in
// memory), or `countersign mcp`, which asks the server through the API,
// started again — and meanwhile an approver edited the call and approved
// it. The model's retry of its own call finds that approval by the call
// as asked, takes it once, and the upstream receives the edited
// arguments; the original call never runs, and the next retry asks anew.
func TestEditedAfterRestart(t *testing.T) {
	t.Parallel()
	asked := map[string]any{"id": "precious"}
	t.Run("serve", func(t *testing.T) {
		h := newHarness(t, nil)
		wantStatus(t, call(t, h.connect(clientOpts{}), "delete_note", asked), "approval_pending")
		r := h.pending("delete_note")
		if err := h.editAndApprove(r.ID, map[string]any{"id": "spare"}); err != nil {
			t.Fatal(err)
		}
		again := h.restarted(nil)
		cs := again.connect(clientOpts{})
		wantEditedRun(t, h, r.ID, call(t, cs, "delete_note", asked))
		wantStatus(t, call(t, cs, "delete_note", asked), "approval_pending")
		wantCalls(t, h.logFile, "delete_note spare")
	})
	t.Run("stdio", func(t *testing.T) {
		h := newHarness(t, func(c *gateway.Config) { c.Upstreams = nil })
		g, _ := h.stdioGateway("agent")
		wantStatus(t, call(t, stdioConnect(t, g, clientOpts{}), "delete_note", asked), "approval_pending")
		g.Close()
		r := h.pending("delete_note")
		if err := h.editAndApprove(r.ID, map[string]any{"id": "spare"}); err != nil {
			t.Fatal(err)
		}
		again, logFile := h.stdioGateway("agent")
		cs := stdioConnect(t, again, clientOpts{})
		wantEditedRun(t, h, r.ID, call(t, cs, "delete_note", asked))
		wantStatus(t, call(t, cs, "delete_note", asked), "approval_pending")
		wantCalls(t, logFile, "delete_note spare")
	})
}

// TestEditedFilesystemAfterRestart: @modelcontextprotocol/server-filesystem
// behind countersign serve, which restarts after the model asked to write
// one file; an approver edits the call to write another, and approves.
// The model's retry of its own call, through the restarted gateway, which
// holds no id of the request, runs the edit: the upstream writes the
// approver's file, never the model's.
func TestEditedFilesystemAfterRestart(t *testing.T) {
	t.Parallel()
	dir := npmDir(t)
	root := t.TempDir()
	fs := func(c *gateway.Config) {
		c.Upstreams = []gateway.UpstreamConfig{{Name: "fs", Command: []string{"node", npmServer(dir, "server-filesystem"), root}}}
	}
	h := newHarness(t, fs)
	asked := map[string]any{"path": filepath.Join(root, "model.txt"), "content": "from the model"}
	edited := map[string]any{"path": filepath.Join(root, "approver.txt"), "content": "from the approver"}
	wantStatus(t, call(t, h.connect(clientOpts{}), "write_file", asked), "approval_pending")
	r := h.pending("write_file")
	if err := h.editAndApprove(r.ID, edited); err != nil {
		t.Fatal(err)
	}

	cs := h.restarted(fs).connect(clientOpts{})
	res := call(t, cs, "write_file", asked)
	if res.IsError || res.Meta["countersign/edited"] != true || !strings.Contains(textOf(res), "from the approver") {
		t.Fatalf("the retry after the restart: %q (error %v, meta %v); want the edited call run, and said so", textOf(res), res.IsError, res.Meta)
	}
	if b, err := os.ReadFile(filepath.Join(root, "approver.txt")); err != nil || string(b) != "from the approver" {
		t.Errorf("the approver's file: %q, %v", b, err)
	}
	if got := h.request(r.ID); got.Status != countersign.StatusConsumed || got.Original == nil {
		t.Errorf("the request: %s, original %+v; want consumed, with the original kept", got.Status, got.Original)
	}
	wantStatus(t, call(t, cs, "write_file", asked), "approval_pending")
	if _, err := os.Stat(filepath.Join(root, "model.txt")); !os.IsNotExist(err) {
		t.Errorf("the model's file was written: %v", err)
	}
}

// wantEditedRun fails the test unless res is the run of the approver's
// edit ("spare") under the request id, which the retry consumed, once.
func wantEditedRun(t *testing.T, h *harness, id string, res *mcp.CallToolResult) {
	t.Helper()
	if res.IsError || !strings.HasPrefix(textOf(res), "deleted spare") || res.Meta["countersign/edited"] != true ||
		!strings.Contains(textOf(res), `{"id":"spare"}`) {
		t.Fatalf("result %q (error %v, meta %v); want the edited call run, and said so", textOf(res), res.IsError, res.Meta)
	}
	if got := h.request(id); got.Status != countersign.StatusConsumed || got.Original == nil {
		t.Errorf("the request: %s, original %+v; want consumed, with the original kept", got.Status, got.Original)
	}
	if got := h.events(id); strings.Join(got, ",") != "created,approved,consumed" {
		t.Errorf("audit events %v, want created, approved, consumed", got)
	}
}
