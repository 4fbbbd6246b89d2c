package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
)

func TestCreateRequest(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	body := `{"kind":"tool","action":"Bash","arguments":{"b":1,"a":2},"preview":"ls","risk_reasons":["reads"],"context":{"user":"u","host":"h","cwd":"/w","session_id":"s1"},"ttl_seconds":120}`
	resp := s.call("POST", "/api/v1/requests", s.KeyA, body)
	r := resp.request(t, http.StatusCreated)

	// The fields the contract names, by their JSON names.
	var fields map[string]any
	json.Unmarshal([]byte(resp.body), &fields)
	for _, f := range []string{"id", "reference", "status", "expires_at", "inbox_url"} {
		if _, ok := fields[f]; !ok {
			t.Errorf("answer lacks %q: %s", f, resp.body)
		}
	}
	sum := sha256.Sum256([]byte(`{"a":2,"b":1}`))
	switch {
	case !strings.HasPrefix(r.ID, "req_") || len(r.Reference) != 7 || r.Reference[3] != '-':
		t.Errorf("id %q reference %q", r.ID, r.Reference)
	case r.Status != "pending" || r.Kind != "tool" || r.Action != "Bash" || r.Key != "a":
		t.Errorf("status %s kind %s action %s key %s", r.Status, r.Kind, r.Action, r.Key)
	case string(r.Arguments) != `{"a":2,"b":1}` || r.ArgsHash != hex.EncodeToString(sum[:]):
		t.Errorf("arguments %s hash %s", r.Arguments, r.ArgsHash)
	case !r.CreatedAt.Equal(start) || !r.ExpiresAt.Equal(start.Add(2*time.Minute)):
		t.Errorf("created %v expires %v", r.CreatedAt, r.ExpiresAt)
	case r.InboxURL != "https://approve.example.com/approvals/"+r.ID:
		t.Errorf("inbox_url %q", r.InboxURL)
	case r.DecidedAt != nil || r.ConsumedAt != nil:
		t.Errorf("a new request shows decided_at or consumed_at: %s", resp.body)
	}

	// The same call with its keys in another order is the same request.
	same := strings.Replace(body, `{"b":1,"a":2}`, `{"a":2,"b":1.0}`, 1)
	if again := s.call("POST", "/api/v1/requests", s.KeyA, same).request(t, http.StatusOK); again.ID != r.ID {
		t.Errorf("identical request: id %s, want %s", again.ID, r.ID)
	}
	// Another key of the account gets its own.
	if b := s.call("POST", "/api/v1/requests", s.keyB, body).request(t, http.StatusCreated); b.ID == r.ID || b.Key != "b" {
		t.Errorf("other key: id %s key %s", b.ID, b.Key)
	}
}

// TestTierReasonMatchesTier: what the human reads of a request's tier is
// the tier that step-up decides on; an agent cannot write "tier: commit"
// over a read-tier request (or the other way round), or a tier over a
// request that has none.
func TestTierReasonMatchesTier(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	for _, body := range []string{
		`{"kind":"mcp","action":"billing__delete_invoice","tier":"read","risk_reasons":["tier: commit"]}`,
		`{"kind":"mcp","action":"billing__delete_invoice","tier":"commit","risk_reasons":["tier: read"]}`,
		`{"kind":"mcp","action":"billing__delete_invoice","risk_reasons":["tier: commit"]}`,
		`{"kind":"tool","action":"Bash","risk_reasons":["tier: commit"]}`,
	} {
		msg := s.call("POST", "/api/v1/requests", s.KeyA, body).wantError(t, body, http.StatusBadRequest, "invalid")
		if !strings.Contains(msg, "tier") {
			t.Errorf("%s: the error %q does not say why", body, msg)
		}
	}
	if list := s.call("GET", "/api/v1/requests", s.alice, "").body; strings.Contains(string(list), "req_") {
		t.Errorf("a refused request was stored: %s", list)
	}
	ok := `{"kind":"mcp","action":"billing__delete_invoice","tier":"commit","risk_reasons":["tier: commit"]}`
	if r := s.call("POST", "/api/v1/requests", s.KeyA, ok).request(t, http.StatusCreated); r.Status != "pending" {
		t.Errorf("a matching tier reason: %+v", r)
	}
}

func TestGetRequest(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	r := s.create(s.KeyA)
	for _, path := range []string{"/api/v1/requests/" + r.ID, "/api/v1/requests/" + r.ID + "?wait=0"} {
		got := s.call("GET", path, s.KeyA, "").request(t, http.StatusOK)
		if got.ID != r.ID || got.Status != "pending" || got.Reference != r.Reference {
			t.Errorf("GET %s: %+v", path, got)
		}
	}
	s.decide(r.ID, "approve")
	if got := s.call("GET", "/api/v1/requests/"+r.ID, s.KeyA, "").request(t, http.StatusOK); got.Status != "approved" || got.DecidedBy != "alice" {
		t.Errorf("after approval: %s by %q", got.Status, got.DecidedBy)
	}
}

func TestListRequests(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	a := s.create(s.KeyA)
	b := s.create(s.keyB)
	s.decide(b.ID, "deny")
	s.create(s.KeyX)

	list := func(cred, query string) []apiRequest {
		t.Helper()
		resp := s.call("GET", "/api/v1/requests"+query, cred, "")
		var out struct {
			Requests []apiRequest `json:"requests"`
		}
		if resp.status != http.StatusOK || json.Unmarshal([]byte(resp.body), &out) != nil || out.Requests == nil {
			t.Fatalf("list %s: %d %s", query, resp.status, resp.body)
		}
		return out.Requests
	}
	if got := list(s.alice, "?status=pending"); len(got) != 1 || got[0].ID != a.ID {
		t.Errorf("alice's pending = %+v, want only %s", got, a.ID)
	}
	if got := list(s.alice, ""); len(got) != 2 {
		t.Errorf("alice's requests = %d, want both of acme", len(got))
	}
	// status=all is every status, as the terminal client's --status all.
	if got := list(s.alice, "?status=all"); len(got) != 2 {
		t.Errorf("alice's requests of every status = %d, want both of acme", len(got))
	}
	if got := list(s.alice, "?reference="+a.Reference); len(got) != 1 || got[0].ID != a.ID {
		t.Errorf("by reference = %+v", got)
	}
	if got := list(s.alice, "?limit=1"); len(got) != 1 {
		t.Errorf("limit=1 gave %d", len(got))
	}
	if got := list(s.bob, "?status=denied"); len(got) != 0 {
		t.Errorf("bob sees %d denied requests of another account", len(got))
	}
	for _, q := range []string{"?status=done", "?limit=0", "?limit=501", "?limit=x", "?reference=nope"} {
		s.call("GET", "/api/v1/requests"+q, s.alice, "").wantError(t, "list "+q, http.StatusBadRequest, countersign.EINVALID)
	}
}

func TestDecisionRoute(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	tests := []struct {
		body, status, text string
	}{
		{`{"decision":"approve"}`, "approved", ""},
		{`{"decision":"deny","text":"no"}`, "denied", "no"},
		{`{"decision":"respond","text":"use git rm"}`, "responded", "use git rm"},
		{`{"decision":"stop"}`, "stopped", ""},
	}
	for _, tt := range tests {
		r := s.create(s.KeyA)
		got := s.call("POST", "/api/v1/requests/"+r.ID+"/decision", s.alice, tt.body).request(t, http.StatusOK)
		if got.Status != tt.status || got.Text != tt.text || got.DecidedBy != "alice" || got.DecidedAt == nil {
			t.Errorf("%s: %s %q by %q", tt.body, got.Status, got.Text, got.DecidedBy)
		}
		before := s.snapshot()
		for _, second := range []string{`{"decision":"approve"}`, `{"decision":"deny"}`} {
			s.call("POST", "/api/v1/requests/"+r.ID+"/decision", s.alice, second).wantError(t, "second decision", http.StatusConflict, countersign.ECONFLICT)
		}
		s.unchanged("a second decision", before)
	}
	// By reference code, as a human types it.
	r := s.create(s.KeyA)
	ref := strings.ToLower(strings.ReplaceAll(r.Reference, "-", ""))
	if got := s.call("POST", "/api/v1/requests/"+ref+"/decision", s.alice, `{"decision":"approve"}`).request(t, http.StatusOK); got.ID != r.ID {
		t.Errorf("decision by reference decided %s, want %s", got.ID, r.ID)
	}
}

func TestAutoApproveOverAPI(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	r := s.create(s.KeyA)
	s.call("POST", "/api/v1/requests/"+r.ID+"/decision", s.alice, `{"decision":"approve","auto_approve_minutes":5}`).request(t, http.StatusOK)

	next := s.call("POST", "/api/v1/requests", s.KeyA, s.toolBody("s1")).request(t, http.StatusCreated)
	if next.Status != "approved" || !next.AutoApproved || next.DecidedBy != countersign.DecidedByAutoApprove {
		t.Errorf("same session: %s auto_approved=%v by %q", next.Status, next.AutoApproved, next.DecidedBy)
	}
	for _, other := range []struct{ cred, body string }{{s.keyB, s.toolBody("s1")}, {s.KeyA, s.toolBody("s2")}} {
		if got := s.call("POST", "/api/v1/requests", other.cred, other.body).request(t, http.StatusCreated); got.Status != "pending" || got.AutoApproved {
			t.Errorf("outside the window: %s auto_approved=%v", got.Status, got.AutoApproved)
		}
	}
}

func TestConsumeRoute(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	r := s.create(s.KeyA)
	s.call("POST", "/api/v1/requests/"+r.ID+"/consume", s.KeyA, "").wantError(t, "consume pending", http.StatusConflict, countersign.ECONFLICT)
	s.decide(r.ID, "approve")

	got := s.call("POST", "/api/v1/requests/"+r.ID+"/consume", s.KeyA, "").request(t, http.StatusOK)
	if got.Status != "consumed" || got.ConsumedAt == nil || !got.ConsumedAt.Equal(start) {
		t.Errorf("consume: %s at %v", got.Status, got.ConsumedAt)
	}
	before := s.snapshot()
	s.call("POST", "/api/v1/requests/"+r.ID+"/consume", s.KeyA, "{}").wantError(t, "consume again", http.StatusConflict, countersign.ECONFLICT)
	s.unchanged("a second consume", before)
}

// TestTakeRoute: an approved request is taken, once, by its binding and
// by the key that asked only; a pending one or another binding finds none.
func TestTakeRoute(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	body := `{"kind":"mcp","action":"delete_note","arguments":{"id":"x"},"preview":"delete x"}`
	r := s.call("POST", "/api/v1/requests", s.KeyA, body).request(t, http.StatusCreated)
	s.call("POST", "/api/v1/requests/take", s.KeyA, body).wantError(t, "take pending", http.StatusNotFound, countersign.ENOTFOUND)
	s.decide(r.ID, "approve")
	before := s.snapshot()
	for what, c := range map[string]struct{ key, body string }{
		"another key":       {s.keyB, body},
		"another account":   {s.KeyX, body},
		"other arguments":   {s.KeyA, strings.Replace(body, `"x"`, `"y"`, 1)},
		"another preview":   {s.KeyA, strings.Replace(body, "delete x", "delete  x", 1)},
		"another kind":      {s.KeyA, strings.Replace(body, `"mcp"`, `"tool"`, 1)},
		"not a binding":     {s.KeyA, `{"kind":"mcp","action":"delete_note","arguments":{"id":1e400}}`},
		"no body":           {s.KeyA, ""},
		"an approver token": {s.alice, body},
	} {
		if got := s.call("POST", "/api/v1/requests/take", c.key, c.body); got.status < 400 || got.status >= 500 {
			t.Errorf("take by %s: %d %s", what, got.status, got.body)
		}
	}
	s.unchanged("takes that find nothing", before)
	if got := s.call("POST", "/api/v1/requests/take", s.KeyA, body).request(t, http.StatusOK); got.ID != r.ID || got.Status != "consumed" {
		t.Errorf("take: %s %s", got.ID, got.Status)
	}
	s.call("POST", "/api/v1/requests/take", s.KeyA, body).wantError(t, "take again", http.StatusNotFound, countersign.ENOTFOUND)
}

func TestCancelRoute(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	r := s.create(s.KeyA)
	if got := s.call("POST", "/api/v1/requests/"+r.ID+"/cancel", s.KeyA, "").request(t, http.StatusOK); got.Status != "cancelled" {
		t.Errorf("cancel: %s", got.Status)
	}
	before := s.snapshot()
	s.call("POST", "/api/v1/requests/"+r.ID+"/cancel", s.KeyA, "").wantError(t, "cancel again", http.StatusConflict, countersign.ECONFLICT)
	s.call("POST", "/api/v1/requests/"+r.ID+"/decision", s.alice, `{"decision":"approve"}`).wantError(t, "decide cancelled", http.StatusConflict, countersign.ECONFLICT)
	s.unchanged("calls on a cancelled request", before)
}

func TestUnknownRoutes(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	r := s.create(s.KeyA)
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/v1/nope"},
		{"GET", "/api/v1/requests/" + r.ID + "/consume"},
		{"DELETE", "/api/v1/requests/" + r.ID},
		{"GET", "/api/v2/requests"},
	} {
		s.call(c.method, c.path, s.KeyA, "").wantError(t, c.method+" "+c.path, http.StatusNotFound, countersign.ENOTFOUND)
	}
	s.call("GET", "/api/v1/requests/req_doesnotexist", s.KeyA, "").wantError(t, "unknown id", http.StatusNotFound, countersign.ENOTFOUND)
}

func TestDecisionRaceOverAPI(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	r := s.create(s.KeyA)
	const n = 8
	codes := make([]int, n)
	gun := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		req := s.newRequest("POST", "/api/v1/requests/"+r.ID+"/decision", s.alice, []string{`{"decision":"approve"}`, `{"decision":"deny"}`}[i%2])
		wg.Go(func() {
			<-gun
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	close(gun)
	wg.Wait()
	won := 0
	for _, c := range codes {
		switch c {
		case http.StatusOK:
			won++
		case http.StatusConflict:
		default:
			t.Errorf("a decision answered %d", c)
		}
	}
	if won != 1 {
		t.Errorf("%d decisions won (%v), want exactly 1", won, codes)
	}
}

// TestClientRoundTrip runs the whole flow through the public client, so that
// client and server agree on the wire format.
func TestClientRoundTrip(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := t.Context()
	agent, human := client.New(s.URL, s.KeyA), client.New(s.URL, s.alice)

	r, created, err := agent.Create(ctx, client.CreateInput{Kind: "tool", Action: "Bash", Arguments: json.RawMessage(`{"cmd":"ls"}`), Context: client.Context{SessionID: "s1"}})
	if err != nil || !created || r.Status != "pending" {
		t.Fatalf("Create: %+v %v %v", r, created, err)
	}
	if _, created, err := agent.Create(ctx, client.CreateInput{Kind: "tool", Action: "Bash", Arguments: json.RawMessage(`{"cmd":"ls"}`), Context: client.Context{SessionID: "s1"}}); err != nil || created {
		t.Errorf("identical Create: created=%v err=%v", created, err)
	}
	list, err := human.List(ctx, "pending", 10)
	if err != nil || len(list) != 1 || list[0].ID != r.ID {
		t.Fatalf("List: %v, %v", list, err)
	}
	if _, err := human.Decide(ctx, r.Reference, client.Decision{Decision: "approve"}); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	if got, err := agent.Wait(ctx, r.ID, time.Second); err != nil || got.Status != "approved" {
		t.Fatalf("Wait: %+v, %v", got, err)
	}
	if got, err := agent.Consume(ctx, r.ID); err != nil || got.Status != "consumed" {
		t.Fatalf("Consume: %+v, %v", got, err)
	}
	_, err = agent.Consume(ctx, r.ID)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusConflict || ce.Code != countersign.ECONFLICT {
		t.Errorf("second Consume: %v", err)
	}
	_, err = human.Decide(ctx, r.ID, client.Decision{Decision: "maybe"})
	if !errors.As(err, &ce) || ce.Status != http.StatusBadRequest {
		t.Errorf("bad decision: %v", err)
	}
}
