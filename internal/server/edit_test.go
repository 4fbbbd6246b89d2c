package server_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
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
