package server_test

import (
	"encoding/json"
	"errors"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/approval"
)

// TestEditOverAPI: an approver approves a Bash call with its command
// edited; the request's JSON and the agent's consume answer carry the
// edited arguments, edited: true and the original; a bad edit is refused
// and changes nothing.
func TestEditOverAPI(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := t.Context()
	agent, human := client.New(s.URL, s.KeyA), client.New(s.URL, s.alice)
	original := json.RawMessage(`{"command":"rm -rf /work/p/a /work/p/b"}`)
	r, _, err := agent.Create(ctx, client.CreateInput{Kind: "tool", Action: "Bash", Arguments: original,
		RiskReasons: []string{"recursive delete"}, Context: client.Context{SessionID: "s1", Cwd: "/work/p"}})
	if err != nil {
		t.Fatal(err)
	}

	before := s.snapshot()
	for _, body := range []string{
		`{"decision":"deny","edit":{"arguments":{"command":"ls"}}}`,
		`{"decision":"approve","auto_approve_minutes":5,"edit":{"arguments":{"command":"ls"}}}`,
		`{"decision":"approve","edit":{"arguments":{"command":"ls 'x"}}}`,
		`{"decision":"approve","edit":{"arguments":"ls"}}`,
		`{"decision":"approve","edit":{}}`,
	} {
		s.call("POST", "/api/v1/requests/"+r.ID+"/decision", s.alice, body).wantError(t, body, http.StatusBadRequest, countersign.EINVALID)
	}
	s.call("POST", "/api/v1/requests/"+r.ID+"/decision", s.bob, `{"decision":"approve","edit":{"arguments":{"command":"ls"}}}`).
		wantError(t, "another account's approver", http.StatusNotFound, countersign.ENOTFOUND)
	s.unchanged("refused edits", before)

	edit := `{"command":"rm -rf /work/p/a"}`
	res := s.call("POST", "/api/v1/requests/"+r.ID+"/decision", s.alice, `{"decision":"approve","edit":{"arguments":`+edit+`}}`)
	got := res.request(t, http.StatusOK)
	if got.Status != "approved" || string(got.Arguments) != edit || got.ArgsHash == r.ArgsHash {
		t.Fatalf("decision: %s %s %s", got.Status, got.Arguments, got.ArgsHash)
	}
	var raw struct {
		Edited   bool `json:"edited"`
		Original struct {
			Arguments   json.RawMessage `json:"arguments"`
			ArgsHash    string          `json:"args_hash"`
			Preview     string          `json:"preview"`
			PreviewHash string          `json:"preview_hash"`
			RiskReasons []string        `json:"risk_reasons"`
		} `json:"original"`
	}
	if err := json.Unmarshal([]byte(res.body), &raw); err != nil || !raw.Edited || raw.Original.ArgsHash != r.ArgsHash ||
		string(raw.Original.Arguments) != string(original) || raw.Original.Preview != r.Preview || raw.Original.PreviewHash != r.PreviewHash ||
		!slices.Equal(raw.Original.RiskReasons, []string{"recursive delete"}) {
		t.Fatalf("decision's JSON: %s", res.body)
	}

	// The Go client reads the same; the agent's consume answer carries
	// the edited arguments to run.
	seen, err := agent.Get(ctx, r.ID)
	if err != nil || !seen.Edited || seen.Original == nil || seen.Original.ArgsHash != r.ArgsHash {
		t.Fatalf("Get: %+v, %v", seen, err)
	}
	// An agent that does not say it runs edits gets no edited approval:
	// it would run what it asked; nothing is consumed.
	before = s.snapshot()
	var ce *client.Error
	if _, err := agent.Consume(ctx, r.ID); !errors.As(err, &ce) || ce.Status != http.StatusConflict || !strings.Contains(ce.Message, "edited") {
		t.Fatalf("Consume without accepting edits: %v, want 409 naming the edit", err)
	}
	s.unchanged("a refused consumption", before)
	agent.AcceptEdits = true
	c, err := agent.Consume(ctx, r.ID)
	if err != nil {
		t.Fatalf("Consume: %v", err)
	}
	if string(c.Arguments) != edit || !c.Edited || c.Original == nil || string(c.Original.Arguments) != string(original) ||
		!slices.Contains(c.RiskReasons, "recursive delete") || !slices.Contains(c.RiskReasons, "edited command: rm deletes files") {
		t.Fatalf("consume answer: %+v", c)
	}

	// The Go client of an approver edits too.
	g, _, err := agent.Create(ctx, client.CreateInput{Kind: "generic", Action: "post", Arguments: json.RawMessage(`{"text":"hi"}`)})
	if err != nil {
		t.Fatal(err)
	}
	d, err := human.Decide(ctx, g.ID, client.Decision{Decision: "approve", Edit: &client.Edit{Arguments: json.RawMessage(`{"text":"hello"}`)}})
	if err != nil || d.Status != "approved" || string(d.Arguments) != `{"text":"hello"}` || !d.Edited || string(d.Original.Arguments) != `{"text":"hi"}` {
		t.Fatalf("Decide with an edit: %+v, %v", d, err)
	}

	// A request no one edited says nothing of an edit.
	plain := s.create(s.KeyA)
	res = s.call("POST", "/api/v1/requests/"+plain.ID+"/decision", s.alice, `{"decision":"approve"}`)
	var none map[string]json.RawMessage
	json.Unmarshal([]byte(res.body), &none)
	if _, ok := none["original"]; ok || none["edited"] != nil {
		t.Errorf("a plain approval's JSON: %s", res.body)
	}
}

// TestEditStaleVote: on a request that needs two approvals, alice's page
// shows the action; carol edits it (her vote). alice's approval from the
// page she read before the edit, and one through the API naming no
// action, are refused (409) and change nothing; the page read again
// shows the edited action, and its approval counts.
func TestEditStaleVote(t *testing.T) {
	t.Parallel()
	e := ibSetupWith(t, approval.Config{Teams: &approval.Teams{Rules: []approval.TeamRule{{Kind: countersign.KindTool,
		Approvers: []string{"alice", "carol"}, Route: "group:sre", Quorum: 2}}}})
	r, _, err := e.agentA.Create(e.Ctx, client.CreateInput{Kind: "tool", Action: "Bash", Arguments: []byte(`{"command":"make test"}`)})
	if err != nil {
		t.Fatal(err)
	}
	alice := e.signIn("alice")
	stale := e.get("/approvals/"+r.ID, e.as(alice.id)).want(t, "alice's page", http.StatusOK).body
	form := formOf(t, stale, "approve")

	carol := client.New(e.URL, e.World.Token("carol", "acme"))
	if got, err := carol.Decide(e.Ctx, r.ID, client.Decision{Decision: "approve", Edit: &client.Edit{Arguments: []byte(`{"command":"make release"}`)}}); err != nil || got.Status != "pending" {
		t.Fatalf("carol's edit: %+v, %v", got, err)
	}
	edited := e.request(r.ID)
	e.decide(alice, r.ID, form).want(t, "alice's approval from the page before the edit", http.StatusConflict)
	aliceAPI := client.New(e.URL, e.World.Token("alice", "acme"))
	var ce *client.Error
	if _, err := aliceAPI.Decide(e.Ctx, r.ID, client.Decision{Decision: "approve"}); !errors.As(err, &ce) || ce.Status != http.StatusConflict {
		t.Fatalf("alice's approval through the API naming no action: %v, want 409", err)
	}
	if got := e.request(r.ID); got.Status != countersign.StatusPending || got.BindingHash() != edited.BindingHash() {
		t.Fatalf("after the refused approvals: %s", got.Status)
	}
	page := e.get("/approvals/"+r.ID, e.as(alice.id)).want(t, "alice's page again", http.StatusOK).body
	if !strings.Contains(page, "make release") {
		t.Fatalf("alice's page does not show the edited action:\n%s", page)
	}
	e.decide(alice, r.ID, formOf(t, page, "approve")).wantRedirect(t, "alice's approval of the edit she saw", "/approvals/"+r.ID)
	if got := e.request(r.ID); got.Status != countersign.StatusApproved || string(got.Arguments) != `{"command":"make release"}` {
		t.Fatalf("after alice's approval: %s %s", got.Status, got.Arguments)
	}
}

var formField = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)

// formOf returns the hidden fields of the page's first form whose
// decision is decision.
func formOf(t *testing.T, page, decision string) url.Values {
	t.Helper()
	for _, f := range strings.Split(page, "<form")[1:] {
		f, _, _ = strings.Cut(f, "</form>")
		v := url.Values{}
		for _, m := range formField.FindAllStringSubmatch(f, -1) {
			v.Set(m[1], html.UnescapeString(m[2]))
		}
		if v.Get("decision") == decision {
			return v
		}
	}
	t.Fatalf("no %s form in the page:\n%s", decision, page)
	return nil
}

// TestTakeEditedOverAPI: POST /api/v1/requests/take with the call as the
// agent asked it finds the approval of an approver's edit of it: a client
// that does not say it runs edits gets 409 naming the edit and takes
// nothing; one that does takes it, once, and the answer carries the
// edited arguments and the original.
func TestTakeEditedOverAPI(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := t.Context()
	agent := client.New(s.URL, s.KeyA)
	call := client.CreateInput{Kind: "mcp", Action: "delete_note", Arguments: json.RawMessage(`{"id":"x","all":true}`),
		Preview: "delete all of x", Tier: "commit"}
	r, _, err := agent.Create(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	edit := `{"all":false,"id":"x"}`
	s.call("POST", "/api/v1/requests/"+r.ID+"/decision", s.alice, `{"decision":"approve","edit":{"arguments":`+edit+`}}`).request(t, http.StatusOK)

	before := s.snapshot()
	var ce *client.Error
	if _, err := agent.Take(ctx, call); !errors.As(err, &ce) || ce.Status != http.StatusConflict || !strings.Contains(ce.Message, "edited") {
		t.Fatalf("Take without accepting edits: %v, want 409 naming the edit", err)
	}
	other := client.New(s.URL, s.keyB)
	other.AcceptEdits = true
	if _, err := other.Take(ctx, call); !errors.As(err, &ce) || ce.Status != http.StatusNotFound {
		t.Fatalf("Take by another key: %v, want 404", err)
	}
	s.unchanged("refused takes", before)

	agent.AcceptEdits = true
	got, err := agent.Take(ctx, call)
	if err != nil {
		t.Fatalf("Take of the original call: %v", err)
	}
	if got.ID != r.ID || got.Status != "consumed" || string(got.Arguments) != edit || !got.Edited || got.Original == nil ||
		got.Original.ArgsHash != r.ArgsHash || got.Original.PreviewHash != r.PreviewHash {
		t.Fatalf("take answer: %+v, want %s consumed with the edited arguments", got, r.ID)
	}
	if _, err := agent.Take(ctx, call); !errors.As(err, &ce) || ce.Status != http.StatusNotFound {
		t.Fatalf("Take again: %v, want 404", err)
	}
}
