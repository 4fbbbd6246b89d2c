package notify_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/notify"
	"github.com/countersign/countersign/internal/testutil"
)

// hookReceiver checks every delivery's signature, as an n8n workflow or any
// receiver should, and keeps the good ones.
type hookReceiver struct {
	secret string
	mu     sync.Mutex
	status int // answer with this instead of 200 when not zero
	got    []delivery
	bad    int
	// arrived, when set, is told of each good delivery (without blocking).
	arrived chan struct{}
}

type delivery struct {
	header http.Header
	raw    []byte
	body   notify.WebhookBody
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	mac := hmac.New(sha256.New, []byte(h.secret))
	mac.Write(raw)
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/webhook/countersign" || !hmac.Equal([]byte(r.Header.Get("X-Countersign-Signature")), []byte(want)) {
		h.bad++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if h.status != 0 {
		w.WriteHeader(h.status)
		return
	}
	var b notify.WebhookBody
	if err := json.Unmarshal(raw, &b); err != nil {
		h.bad++
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	h.got = append(h.got, delivery{header: r.Header.Clone(), raw: raw, body: b})
	if h.arrived != nil {
		select {
		case h.arrived <- struct{}{}:
		default:
		}
	}
}

func (h *hookReceiver) deliveries() []delivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]delivery(nil), h.got...)
}

func (h *hookReceiver) answer(status int) {
	h.mu.Lock()
	h.status = status
	h.mu.Unlock()
}

func addWebhook(t *testing.T, e *env, name, base, secret string) {
	t.Helper()
	_, err := e.admin.Add(e.ctx, notify.Spec{Account: "acme", Name: name, Type: countersign.ChannelWebhook,
		Settings: notify.Settings{URL: base + "/webhook/countersign"}, Secret: secret})
	if err != nil {
		t.Fatalf("add webhook: %v", err)
	}
}

func TestWebhookCreatedAndDecided(t *testing.T) {
	e := newEnv(t)
	hook := &hookReceiver{secret: "a webhook secret"}
	rcv := newReceiver(t, hook)
	addWebhook(t, e, "n8n", rcv.URL(), hook.secret)

	r := e.ask("rm -rf /srv/data")
	e.runOnce(1)
	got := hook.deliveries()
	if len(got) != 1 || hook.bad != 0 {
		t.Fatalf("deliveries = %d, bad = %d; want one good one", len(got), hook.bad)
	}
	d := got[0]
	b := d.body
	ref := countersign.FormatReference(r.Reference)
	if b.Event != "created" || b.Account != "acme" || b.Channel != "n8n" || b.DeliveryID == "" ||
		d.header.Get("X-Countersign-Event") != "created" || d.header.Get("X-Countersign-Delivery") != b.DeliveryID ||
		d.header.Get("Content-Type") != "application/json" || b.Timestamp != e.clock.Now().Unix() {
		t.Errorf("envelope = %+v, headers %v", b, d.header)
	}
	req := b.Request
	if req == nil || req.ID != r.ID || req.Reference != ref || req.Kind != countersign.KindRm || req.Action != "rm -rf /srv/data" ||
		req.Status != countersign.StatusPending || strings.Join(req.RiskReasons, "|") != "recursive deletion (-r/-R)|protected path: /srv" ||
		strings.Join(req.Targets, "|") != "/srv/data/a|/srv/data/<b>" || req.Context.Host != "prod-01" || req.KeyName != "laptop" ||
		!req.ExpiresAt.Equal(r.ExpiresAt) || req.DecidedAt != nil {
		t.Errorf("request = %+v", req)
	}
	if b.InboxURL != e.public.String()+"/approvals/"+r.ID {
		t.Errorf("inbox_url = %q", b.InboxURL)
	}
	for name, link := range map[string]string{"approve": b.ApproveURL, "deny": b.DenyURL, "stop": b.StopURL} {
		if !strings.HasPrefix(link, e.public.String()+"/links/") || len(link) != len(e.public.String()+"/links/")+64 {
			t.Errorf("%s_url = %q", name, link)
		}
	}
	// No arguments, no agent secrets: only what the inbox shows.
	if strings.Contains(string(d.raw), `"arguments"`) || strings.Contains(string(d.raw), "csk_") {
		t.Errorf("the body holds more than the request's public fields: %s", d.raw)
	}

	// The deny link from the webhook works once: GET shows, POST decides.
	if code, page := e.follow(b.DenyURL); code != http.StatusOK || !strings.Contains(page, "Deny "+ref) {
		t.Fatalf("GET deny link = %d\n%s", code, page)
	}
	if st := e.request(r.ID).Status; st != countersign.StatusPending {
		t.Fatalf("a GET decided: status %s", st)
	}
	if code, page := e.press(b.DenyURL, url.Values{"reason": {"not on prod"}}); code != http.StatusOK || !strings.Contains(page, "Done.") {
		t.Fatalf("POST deny link = %d\n%s", code, page)
	}
	if got := e.request(r.ID); got.Status != countersign.StatusDenied || got.Reason != "not on prod" || got.DecidedBy != "email link" {
		t.Fatalf("after the deny link: %+v", got)
	}

	// The decision is followed up with a decided event, without links.
	e.runOnce(1)
	got = hook.deliveries()
	if len(got) != 2 {
		t.Fatalf("deliveries = %d, want the follow-up too", len(got))
	}
	f := got[1].body
	if f.Event != "decided" || f.DeliveryID == b.DeliveryID || f.Request.Status != countersign.StatusDenied ||
		f.Request.DecidedBy != "email link" || f.Request.Reason != "not on prod" || f.Request.DecidedAt == nil ||
		f.ApproveURL != "" || f.DenyURL != "" || f.StopURL != "" {
		t.Errorf("follow-up = %+v, request %+v", f, f.Request)
	}
	e.runOnce(0)
	if st := e.status("n8n"); st.Sent != 2 || st.Pending != 0 || st.Failed != 0 || st.LastError != "" {
		t.Errorf("status = %+v", st)
	}
	e.noTokens(string(got[0].raw))
}

// TestWebhookDownThenBack: a receiver that refuses connections, then
// answers 503, then works gets the notification exactly once; the agent's
// request never waits for it.
func TestWebhookDownThenBack(t *testing.T) {
	e := newEnv(t)
	hook := &hookReceiver{secret: "s3cret-s3cret"}
	rcv := newReceiver(t, hook)
	addWebhook(t, e, "n8n", rcv.URL(), hook.secret)
	rcv.down()

	r := e.ask("rm -rf /srv/data")
	if r.Status != countersign.StatusPending {
		t.Fatalf("request status %s", r.Status)
	}
	e.runOnce(1)
	st := e.status("n8n")
	if st.Pending != 1 || st.Retrying != 1 || st.Sent != 0 || !strings.Contains(st.LastError, "connection refused") ||
		!st.LastErrorAt.Equal(e.clock.Now()) || !st.NextAttemptAt.After(e.clock.Now()) {
		t.Fatalf("status while down = %+v", st)
	}
	if strings.Contains(st.LastError, "/webhook/countersign") {
		t.Errorf("the error names the webhook's path: %q", st.LastError)
	}
	// Not due again before its backoff ends.
	e.runOnce(0)

	rcv.up()
	hook.answer(http.StatusServiceUnavailable)
	e.clock.Advance(time.Minute)
	e.runOnce(1)
	if st := e.status("n8n"); st.Pending != 1 || !strings.Contains(st.LastError, "503") {
		t.Fatalf("status after a 503 = %+v", st)
	}

	hook.answer(0)
	e.clock.Advance(time.Hour)
	e.runOnce(1)
	e.clock.Advance(time.Hour)
	e.runOnce(0)
	if got := hook.deliveries(); len(got) != 1 || got[0].body.Request.ID != r.ID {
		t.Fatalf("delivered %d times, want once", len(got))
	}
	st = e.status("n8n")
	if st.Sent != 1 || st.Pending != 0 || st.Failed != 0 || !strings.Contains(st.LastError, "503") {
		t.Errorf("status after delivery = %+v; the last error stays visible", st)
	}
}

// TestWebhookGivesUp: an item that never gets through is given up after its
// last attempt and shows as failed.
func TestWebhookGivesUp(t *testing.T) {
	e := newEnv(t)
	e.worker = notify.NewWorker(e.store, e.delivery, e.clock, e.log, notify.WorkerConfig{MaxAttempts: 3})
	hook := &hookReceiver{secret: "s3cret-s3cret", status: http.StatusInternalServerError}
	rcv := newReceiver(t, hook)
	addWebhook(t, e, "n8n", rcv.URL(), hook.secret)
	e.ask("rm -rf /srv/data")
	for range 3 {
		e.runOnce(1)
		e.clock.Advance(time.Hour)
	}
	e.runOnce(0)
	st := e.status("n8n")
	if st.Failed != 1 || st.Pending != 0 || st.Sent != 0 || !strings.Contains(st.LastError, "500") {
		t.Fatalf("status = %+v", st)
	}
	if !strings.Contains(e.logs.String(), "giving up") {
		t.Errorf("the log does not say the notification was given up")
	}
}

// TestWebhookRestart: a notification queued before a restart is delivered
// once after it.
func TestWebhookRestart(t *testing.T) {
	e := newEnv(t)
	hook := &hookReceiver{secret: "s3cret-s3cret"}
	rcv := newReceiver(t, hook)
	addWebhook(t, e, "n8n", rcv.URL(), hook.secret)
	r := e.ask("rm -rf /srv/data")

	e.restart()
	e.runOnce(1)
	got := hook.deliveries()
	if len(got) != 1 || got[0].body.Request.ID != r.ID {
		t.Fatalf("delivered %d times after the restart, want once", len(got))
	}
	// Its links work: the tokens survived, sealed, in the store.
	if code, page := e.press(got[0].body.ApproveURL, nil); code != http.StatusOK || !strings.Contains(page, "Done.") {
		t.Fatalf("approve link after a restart = %d\n%s", code, page)
	}
	e.runOnce(1) // the follow-up of the approval
	e.restart()
	e.clock.Advance(time.Hour)
	e.runOnce(0)
	if got := hook.deliveries(); len(got) != 2 || got[1].body.Event != "decided" {
		t.Fatalf("after a second restart: %d deliveries, want the announcement and its follow-up once each", len(got))
	}
}

// TestWebhookTwoWorkers: two senders on one store (two replicas) deliver
// every notification once.
func TestWebhookTwoWorkers(t *testing.T) {
	e := newEnv(t)
	hook := &hookReceiver{secret: "s3cret-s3cret"}
	rcv := newReceiver(t, hook)
	addWebhook(t, e, "n8n", rcv.URL(), hook.secret)
	const n = 5
	for i := range n {
		e.ask("rm -rf /srv/data/" + string(rune('a'+i)))
	}
	other := notify.NewWorker(e.store, e.delivery, e.clock, e.log, notify.WorkerConfig{Batch: 1})
	var wg sync.WaitGroup
	for _, w := range []*notify.Worker{e.worker, other} {
		wg.Go(func() {
			for {
				if n, err := w.RunOnce(e.ctx); err != nil || n == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	seen := map[string]int{}
	for _, d := range hook.deliveries() {
		seen[d.body.DeliveryID]++
	}
	if len(seen) != n {
		t.Fatalf("%d distinct deliveries, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("delivery %s arrived %d times", id, c)
		}
	}
}

// TestWebhookEchoNotKept: a receiver that echoes a link's token in its
// status line, well-formed or not, gets it neither into the log nor into
// the channel's status.
func TestWebhookEchoNotKept(t *testing.T) {
	for name, line := range map[string]string{
		"reason phrase": "HTTP/1.1 500 echo /links/%s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
		"malformed":     "JUNK /links/%s\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			var mu sync.Mutex
			var token string
			rcv := newReceiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var b notify.WebhookBody
				raw, _ := io.ReadAll(r.Body)
				json.Unmarshal(raw, &b)
				tok := b.ApproveURL[strings.LastIndex(b.ApproveURL, "/")+1:]
				mu.Lock()
				token = tok
				mu.Unlock()
				conn, _, err := http.NewResponseController(w).Hijack()
				if err != nil {
					t.Error(err)
					return
				}
				defer conn.Close()
				fmt.Fprintf(conn, line, tok)
			}))
			addWebhook(t, e, "n8n", rcv.URL(), "s3cret-s3cret")
			e.ask("rm -rf /srv/data")
			e.runOnce(1)
			mu.Lock()
			tok := token
			mu.Unlock()
			if len(tok) != 64 {
				t.Fatalf("the receiver got no link: %q", tok)
			}
			st := e.status("n8n")
			if st.LastError == "" || strings.Contains(st.LastError, tok) || strings.Contains(e.logs.String(), tok) {
				t.Errorf("the token reached the status %q or the log:\n%s", st.LastError, e.logs.String())
			}
		})
	}
}

// TestWorkerWokenByCommit: a running worker whose poll is an hour apart
// sends a new request's webhook, and the follow-up of its decision, at
// once: the store rings it after the commit that added them.
func TestWorkerWokenByCommit(t *testing.T) {
	e := newEnv(t)
	hook := &hookReceiver{secret: "a webhook secret", arrived: make(chan struct{}, 1)}
	rcv := newReceiver(t, hook)
	addWebhook(t, e, "n8n", rcv.URL(), hook.secret)
	w := notify.NewWorker(e.store, e.delivery, e.clock, e.log, notify.WorkerConfig{Interval: time.Hour})
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	// The worker looks only hourly by itself: a delivery in time comes
	// from a wake-up.
	waitDeliveries := func(n int) []delivery {
		t.Helper()
		for {
			if got := hook.deliveries(); len(got) >= n {
				return got
			}
			testutil.Receive(t, hook.arrived, fmt.Sprintf("delivery %d of %d", len(hook.deliveries())+1, n))
		}
	}
	// The first may be found by the worker's first look, which runs at
	// its start; the second and the follow-up only by a wake-up.
	e.ask("rm -rf /srv/data")
	waitDeliveries(1)
	r := e.ask("rm -rf /srv/other")
	got := waitDeliveries(2)
	b := got[1].body
	if b.Event != "created" || b.Request == nil || b.Request.ID != r.ID {
		t.Fatalf("second delivery = %+v, want the creation of %s", b, r.ID)
	}
	if code, page := e.press(b.DenyURL, url.Values{"reason": {"no"}}); code != http.StatusOK {
		t.Fatalf("POST deny link = %d\n%s", code, page)
	}
	got = waitDeliveries(3)
	if f := got[2].body; f.Event != "decided" || f.Request.ID != r.ID {
		t.Fatalf("third delivery = %+v, want the decision of %s", f, r.ID)
	}
}

// TestViewerAccountLinksOff: once an account has a viewer, its
// notifications carry no one-time links, and a link sent before the
// viewer joined decides nothing: a link stands for whoever holds it, and a
// viewer may read the account's channels.
func TestViewerAccountLinksOff(t *testing.T) {
	e := newEnv(t)
	hook := &hookReceiver{secret: "a webhook secret"}
	rcv := newReceiver(t, hook)
	addWebhook(t, e, "n8n", rcv.URL(), hook.secret)

	before := e.ask("rm -rf /srv/data")
	e.runOnce(1)
	old := hook.deliveries()[0].body
	if old.ApproveURL == "" || old.DenyURL == "" {
		t.Fatalf("an account without viewers got no links: %+v", old)
	}

	e.srv.World.Approver("vic", "acme")
	if err := e.srv.Admin.SetRole(e.ctx, "acme", "vic", countersign.RoleViewer); err != nil {
		t.Fatal(err)
	}
	after := e.ask("rm -rf /srv/other")
	e.runOnce(1)
	b := hook.deliveries()[1].body
	if b.Request == nil || b.Request.ID != after.ID || b.ApproveURL != "" || b.DenyURL != "" || b.StopURL != "" ||
		b.InboxURL != e.public.String()+"/approvals/"+after.ID {
		t.Fatalf("with a viewer, the notification = %+v; want the inbox link alone", b)
	}

	for name, link := range map[string]string{"approve": old.ApproveURL, "deny": old.DenyURL} {
		// The page says so at once, with no button to press.
		code, page := e.follow(link)
		if code != http.StatusOK || !strings.Contains(page, "decide it in the inbox") || strings.Contains(page, "<form") {
			t.Errorf("GET %s link with a viewer = %d, want the reason and no form\n%s", name, code, page)
		}
		code, page = e.press(link, nil)
		if code != http.StatusForbidden || !strings.Contains(page, "decide it in the inbox") || strings.Contains(page, "<form") {
			t.Errorf("POST %s link with a viewer = %d, want 403 with the reason and no form\n%s", name, code, page)
		}
	}
	if got := e.request(before.ID); got.Status != countersign.StatusPending {
		t.Fatalf("a link decided on an account with a viewer: %s by %q", got.Status, got.DecidedBy)
	}
}
