package notify_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/notify"
)

// ntfyServer speaks the publish side of ntfy's API: POST or PUT /<topic>
// with the message as the body and Title, Priority, Tags, Click, Actions
// and X-Sequence-ID headers, behind a bearer token. Like ntfy 2.16, a
// message with the sequence id of an earlier one replaces it.
type ntfyServer struct {
	topic, token string
	mu           sync.Mutex
	published    []ntfyMessage
	shown        map[string]ntfyMessage // by sequence id: what a phone shows
}

type ntfyMessage struct {
	ID, Sequence, Title, Body, Priority, Tags, Click, Actions string
}

func (n *ntfyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost && r.Method != http.MethodPut {
		http.Error(w, `{"code":40501,"error":"method not allowed"}`, http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path != "/"+n.topic {
		http.Error(w, `{"code":40401,"error":"page not found"}`, http.StatusNotFound)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+n.token {
		http.Error(w, `{"code":40301,"error":"forbidden"}`, http.StatusForbidden)
		return
	}
	body, _ := io.ReadAll(r.Body)
	h := r.Header
	n.mu.Lock()
	defer n.mu.Unlock()
	m := ntfyMessage{
		ID: countersign.NewID("")[:12], Sequence: h.Get("X-Sequence-ID"), Title: h.Get("Title"), Body: string(body),
		Priority: h.Get("Priority"), Tags: h.Get("Tags"), Click: h.Get("Click"), Actions: h.Get("Actions"),
	}
	if m.Sequence == "" {
		m.Sequence = m.ID
	}
	n.published = append(n.published, m)
	if n.shown == nil {
		n.shown = map[string]ntfyMessage{}
	}
	n.shown[m.Sequence] = m
	json.NewEncoder(w).Encode(map[string]any{"id": m.ID, "event": "message", "topic": n.topic, "sequence_id": m.Sequence, "message": m.Body})
}

func (n *ntfyServer) messages() ([]ntfyMessage, map[string]ntfyMessage) {
	n.mu.Lock()
	defer n.mu.Unlock()
	shown := map[string]ntfyMessage{}
	for k, v := range n.shown {
		shown[k] = v
	}
	return append([]ntfyMessage(nil), n.published...), shown
}

func addNtfy(t *testing.T, e *env, server, topic, token string) {
	t.Helper()
	_, err := e.admin.Add(e.ctx, notify.Spec{Account: "acme", Name: "phone", Type: countersign.ChannelNtfy,
		Settings: notify.Settings{Server: server, Topic: topic}, Secret: token})
	if err != nil {
		t.Fatalf("add ntfy channel: %v", err)
	}
}

func TestNtfyReplacedOnDecision(t *testing.T) {
	e := newEnv(t)
	ntfy := &ntfyServer{topic: "countersign-x8k2", token: "tk_abcdefghijklmnop"}
	rcv := newReceiver(t, ntfy)
	addNtfy(t, e, rcv.URL(), ntfy.topic, ntfy.token)

	r := e.ask("rm -rf /srv/data")
	ref := countersign.FormatReference(r.Reference)
	inbox := e.public.String() + "/approvals/" + r.ID
	e.runOnce(1)
	published, shown := ntfy.messages()
	if len(published) != 1 {
		t.Fatalf("published %d messages, want 1", len(published))
	}
	m := published[0]
	if len(shown) != 1 || shown[r.ID] != m {
		t.Errorf("the phone shows %+v, want only the published message under its sequence id", shown)
	}
	if m.Sequence != r.ID || m.Title != "Approve? "+ref+" (rm)" || m.Priority != "high" || m.Click != inbox ||
		m.Actions != "view, Open in inbox, "+inbox+", clear=true" {
		t.Errorf("message = %+v", m)
	}
	for _, want := range []string{"rm -rf /srv/data", "recursive deletion (-r/-R)", "Expires "} {
		if !strings.Contains(m.Body, want) {
			t.Errorf("body lacks %q:\n%s", want, m.Body)
		}
	}
	// No secret in a push message: no link token, no agent key.
	if strings.Contains(m.Body+m.Actions+m.Click, "/links/") {
		t.Errorf("a push message carries a one-time link: %+v", m)
	}

	// The decision replaces the message on the phone.
	_, err := e.svc.Decide(e.ctx, countersign.ApproverPrincipal{Username: "alice", AccountID: e.account.ID, Role: countersign.RoleAdmin}, r.ID,
		countersign.DecisionInput{Decision: countersign.DecisionDeny, Text: "no"})
	if err != nil {
		t.Fatal(err)
	}
	e.runOnce(1)
	published, shown = ntfy.messages()
	if len(published) != 2 || len(shown) != 1 {
		t.Fatalf("published %d, shown %d; want the follow-up to replace the first", len(published), len(shown))
	}
	f := shown[r.ID]
	if f.Title != ref+" denied" || !strings.Contains(f.Body, "denied by alice") || f.Priority != "low" || f.Tags != "x" {
		t.Errorf("replacement = %+v", f)
	}
}

func TestNtfyExpiry(t *testing.T) {
	e := newEnv(t)
	ntfy := &ntfyServer{topic: "t", token: "tk_x"}
	rcv := newReceiver(t, ntfy)
	addNtfy(t, e, rcv.URL(), ntfy.topic, ntfy.token)
	r := e.ask("rm -rf /srv/data")
	e.runOnce(1)

	e.clock.Advance(11 * time.Minute)
	if n, err := e.svc.Sweep(e.ctx); err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v", n, err)
	}
	e.runOnce(1)
	_, shown := ntfy.messages()
	if m := shown[r.ID]; m.Title != countersign.FormatReference(r.Reference)+" expired" || !strings.Contains(m.Body, "expired without a decision") {
		t.Errorf("after expiry the phone shows %+v", m)
	}

	// An announcement whose request was decided before it went out is
	// not sent: only its follow-up is.
	r2 := e.ask("rm -rf /srv/other")
	if _, err := e.svc.Cancel(e.ctx, e.agent, r2.ID); err != nil {
		t.Fatal(err)
	}
	e.runOnce(2)
	published, _ := ntfy.messages()
	last := published[len(published)-1]
	if len(published) != 3 || last.Sequence != r2.ID || !strings.Contains(last.Body, "cancelled by the agent") {
		t.Errorf("published %+v", published)
	}
	if st := e.status("phone"); st.Sent != 4 || st.Pending != 0 {
		t.Errorf("status = %+v", st)
	}
}

// TestNtfyWrongToken: a refused token is an error with the answer's
// status, retried later, and the token shows nowhere.
func TestNtfyWrongToken(t *testing.T) {
	e := newEnv(t)
	ntfy := &ntfyServer{topic: "t", token: "tk_right"}
	rcv := newReceiver(t, ntfy)
	addNtfy(t, e, rcv.URL(), ntfy.topic, "tk_wrong_token")
	e.ask("rm -rf /srv/data")
	e.runOnce(1)
	st := e.status("phone")
	if st.Pending != 1 || !strings.Contains(st.LastError, "403") || strings.Contains(st.LastError, "tk_wrong") {
		t.Errorf("status = %+v", st)
	}
	if strings.Contains(e.logs.String(), "tk_wrong") {
		t.Errorf("the token is in the log")
	}
}
