package approval_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
)

// mcpCall is an MCP call as the gateway asks about it.
func mcpCall(tool, args string) countersign.CreateInput {
	return countersign.CreateInput{Kind: countersign.KindMCP, Action: tool, Arguments: json.RawMessage(args),
		Preview: "Tool: " + tool + "\n" + args, Tier: countersign.TierWrite}
}

func TestTakeApproval(t *testing.T) {
	e := newEnv(t, approval.Config{})
	call := mcpCall("fs_write", `{"path": "/a", "text": "x"}`)
	r := e.create(e.keyA, call)

	// Nothing to take while the request waits.
	_, err := e.svc.TakeApproval(e.ctx, e.keyA, call)
	wantCode(t, "TakeApproval(pending)", err, countersign.ENOTFOUND)
	e.decide(r.ID, countersign.DecisionApprove)
	before := e.auditCount()

	// Another key, even of the same account, and any change of the call
	// take nothing.
	_, err = e.svc.TakeApproval(e.ctx, e.keyB, call)
	wantCode(t, "TakeApproval(another key)", err, countersign.ENOTFOUND)
	_, err = e.svc.TakeApproval(e.ctx, e.keyX, call)
	wantCode(t, "TakeApproval(another account)", err, countersign.ENOTFOUND)
	changed := mcpCall("fs_write", `{"path": "/b", "text": "x"}`)
	changed.Preview = call.Preview
	_, err = e.svc.TakeApproval(e.ctx, e.keyA, changed)
	wantCode(t, "TakeApproval(changed arguments)", err, countersign.ENOTFOUND)
	other := call
	other.Preview += " (shaped)"
	_, err = e.svc.TakeApproval(e.ctx, e.keyA, other)
	wantCode(t, "TakeApproval(another preview)", err, countersign.ENOTFOUND)
	// The tier is part of what is taken: an approval of the call filed
	// as of another tier (or of none) is not one of a commit call.
	for _, tier := range []countersign.Tier{countersign.TierCommit, ""} {
		higher := call
		higher.Tier = tier
		_, err = e.svc.TakeApproval(e.ctx, e.keyA, higher)
		wantCode(t, "TakeApproval(tier "+string(tier)+")", err, countersign.ENOTFOUND)
	}
	if n := e.auditCount(); n != before {
		t.Errorf("refused takes wrote %d audit entries", n-before)
	}

	// Key order and spacing do not change the call.
	same := mcpCall("fs_write", `{"text":"x","path":"/a"}`)
	same.Preview = call.Preview
	got, err := e.svc.TakeApproval(e.ctx, e.keyA, same)
	if err != nil {
		t.Fatalf("TakeApproval: %v", err)
	}
	if got.ID != r.ID || got.Status != countersign.StatusConsumed || !got.ConsumedAt.Equal(e.clock.Now()) {
		t.Errorf("took %s (%s at %v), want %s consumed now", got.ID, got.Status, got.ConsumedAt, r.ID)
	}
	if ev := e.events(r.ID); len(ev) != 3 || ev[2] != "consumed" {
		t.Errorf("audit events %v, want created, approved, consumed", ev)
	}
	_, err = e.svc.TakeApproval(e.ctx, e.keyA, call)
	wantCode(t, "TakeApproval(twice)", err, countersign.ENOTFOUND)
	_, err = e.svc.Consume(e.ctx, e.keyA, r.ID)
	wantCode(t, "Consume after TakeApproval", err, countersign.ECONFLICT)
}

func TestTakeApprovalExpired(t *testing.T) {
	e := newEnv(t, approval.Config{TTL: time.Minute, ConsumeGrace: time.Minute})
	call := mcpCall("send_mail", `{"to":"x@example.com"}`)
	r := e.create(e.keyA, call)
	e.decide(r.ID, countersign.DecisionApprove)
	e.clock.Advance(time.Minute)
	_, err := e.svc.TakeApproval(e.ctx, e.keyA, call)
	wantCode(t, "TakeApproval(expired)", err, countersign.ENOTFOUND)
}

func TestTakeApprovalRace(t *testing.T) {
	e := newEnv(t, approval.Config{})
	call := mcpCall("deploy", `{"env":"prod"}`)
	r := e.create(e.keyA, call)
	e.decide(r.ID, countersign.DecisionApprove)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 20 {
		wg.Go(func() {
			_, err := e.svc.TakeApproval(e.ctx, e.keyA, call)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				wins++
			} else if countersign.ErrorCode(err) != countersign.ENOTFOUND {
				t.Errorf("TakeApproval: %v", err)
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d retries took one approval, want exactly 1", wins)
	}
	e.wantStatus(r.ID, countersign.StatusConsumed)
}

// TestBindIsTheRequestsBinding: the binding a caller makes with Bind (the
// MCP gateway's, before it asks) is the one the service stores for the
// request and the one a retry takes it by, whatever the arguments' key
// order and spacing; an empty preview is the default one.
func TestBindIsTheRequestsBinding(t *testing.T) {
	e := newEnv(t, approval.Config{})
	call := mcpCall("fs_write", `{ "text": "x",  "path": "/a" }`)
	b, err := approval.Bind(call.Action, call.Arguments, call.Preview)
	if err != nil {
		t.Fatal(err)
	}
	if string(b.Args) != `{"path":"/a","text":"x"}` || b.Preview != call.Preview {
		t.Fatalf("Bind: args %s, preview %q", b.Args, b.Preview)
	}
	r := e.create(e.keyA, call)
	if r.ArgsHash != b.ArgsHash || r.PreviewHash != b.PreviewHash || string(r.Arguments) != string(b.Args) {
		t.Errorf("stored binding %s/%s of %s, Bind's %s/%s of %s", r.ArgsHash, r.PreviewHash, r.Arguments, b.ArgsHash, b.PreviewHash, b.Args)
	}
	e.decide(r.ID, countersign.DecisionApprove)
	// The retry sends the canonical arguments and the preview, as the
	// gateway does.
	retry := call
	retry.Arguments = b.Args
	if got, err := e.svc.TakeApproval(e.ctx, e.keyA, retry); err != nil || got.ID != r.ID {
		t.Errorf("TakeApproval with Bind's arguments: %v, %v", got, err)
	}

	noPreview, err := approval.Bind("fs_write", json.RawMessage(`{}`), "")
	if err != nil || noPreview.Preview != approval.DefaultPreview("fs_write", json.RawMessage(`{}`)) ||
		noPreview.PreviewHash != approval.Hash([]byte(noPreview.Preview)) {
		t.Errorf("Bind without a preview: %+v, %v", noPreview, err)
	}
	if _, err := approval.Bind("fs_write", json.RawMessage(`{"n": 9007199254740993}`), "p"); !errors.Is(err, approval.ErrInexactNumber) {
		t.Errorf("Bind of an inexact number: %v, want ErrInexactNumber", err)
	}
}

// TestTakeApprovalEdited: an approver edited an MCP call before approving
// it; the model's retry of the call it asked takes that approval once and
// gets the edited arguments to run, when the caller runs edits; a caller
// that does not is refused and takes nothing.
func TestTakeApprovalEdited(t *testing.T) {
	e := newEnv(t, approval.Config{})
	call := mcpCall("fs_write", `{"path": "/a", "text": "x"}`)
	r := e.create(e.keyA, call)
	edit := `{"path":"/tmp/a","text":"x"}`
	if _, err := e.svc.Decide(e.ctx, e.alice, r.ID, approveEdit(edit)); err != nil {
		t.Fatalf("approve with an edit: %v", err)
	}
	before := e.auditCount()
	_, err := e.svc.TakeApproval(e.ctx, e.keyA, call)
	wantCode(t, "TakeApproval(original, edits not run)", err, countersign.ECONFLICT)
	if err == nil || !strings.Contains(err.Error(), "edited") {
		t.Fatalf("refusal: %v, want one naming the edit", err)
	}
	_, err = e.svc.TakeApproval(approval.AcceptEdits(e.ctx), e.keyB, call)
	wantCode(t, "TakeApproval(original, another key)", err, countersign.ENOTFOUND)
	if n := e.auditCount(); n != before {
		t.Errorf("refused takes wrote %d audit entries", n-before)
	}
	e.wantStatus(r.ID, countersign.StatusApproved)

	got, err := e.svc.TakeApproval(approval.AcceptEdits(e.ctx), e.keyA, call)
	if err != nil {
		t.Fatalf("TakeApproval(original): %v", err)
	}
	if got.ID != r.ID || got.Status != countersign.StatusConsumed || string(got.Arguments) != edit || got.ArgsHash != sha(edit) ||
		got.Original == nil || got.Original.ArgsHash != r.ArgsHash || got.Original.PreviewHash != r.PreviewHash {
		t.Fatalf("took %+v, want %s consumed with the edited arguments and the original", got, r.ID)
	}
	if ev := e.events(r.ID); len(ev) != 3 || ev[2] != "consumed" {
		t.Errorf("audit events %v, want created, approved, consumed", ev)
	}
	_, err = e.svc.TakeApproval(approval.AcceptEdits(e.ctx), e.keyA, call)
	wantCode(t, "TakeApproval(original, twice)", err, countersign.ENOTFOUND)
}
