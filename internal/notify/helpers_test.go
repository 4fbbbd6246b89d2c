package notify_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/notify"
	"github.com/countersign/countersign/internal/store/sqlite"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/countersign/countersign/internal/testutil/testserver"
)

// env is the whole server on a testutil.World (testserver): the approval
// service with the notifier, the HTTP server at its public URL, and a
// worker, all on the World's clock, and the agent key laptop of acme.
// Everything logs to logs.
type env struct {
	t        *testing.T
	ctx      context.Context
	path     string
	srv      *testserver.Server
	store    *sqlite.DB
	clock    *testutil.Clock
	svc      *approval.Service
	public   *url.URL
	delivery *notify.Delivery
	worker   *notify.Worker
	admin    *notify.Admin
	agent    countersign.Agent
	account  *countersign.Account
	logs     *testutil.LogBuffer
	log      *slog.Logger
}

func newEnv(t *testing.T) *env {
	t.Helper()
	// Real time, so that the server's sessions and the fake clock agree
	// roughly; the fake clock moves only when a test moves it.
	s := testserver.New(t, testserver.At(time.Now().UTC().Truncate(time.Second)),
		testserver.Approval(func(s *testserver.Server, c *approval.Config) { c.Notifier = notify.NewNotifier(s.Store) }))
	e := &env{t: t, ctx: s.Ctx, path: s.Path, srv: s, store: s.World.Store, clock: s.Clock, account: s.Acme, logs: s.Logs,
		public: s.Public, delivery: &notify.Delivery{PublicURL: s.Public}}
	e.log = slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.build()
	var err error
	if e.agent, err = s.Auth.Agent(e.ctx, s.Key("acme", "laptop")); err != nil {
		t.Fatal(err)
	}
	return e
}

// build takes the server's service and makes the notifier's admin and
// the worker on the store.
func (e *env) build() {
	e.svc = e.srv.Service
	e.admin = &notify.Admin{Store: e.store, Clock: e.clock}
	e.worker = notify.NewWorker(e.store, e.delivery, e.clock, e.log, notify.WorkerConfig{})
}

// restart closes the store and opens it again with a new service, server
// and worker, as a restarted server would.
func (e *env) restart() {
	e.t.Helper()
	if err := e.store.Close(); err != nil {
		e.t.Fatal(err)
	}
	store, err := sqlite.Open(e.ctx, e.path)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { store.Close() })
	e.store = store
	e.srv.Restart(e.t, store)
	e.build()
}

// ask creates a pending request of the agent.
func (e *env) ask(action string) *countersign.Request {
	e.t.Helper()
	r, created, err := e.svc.Create(e.ctx, e.agent, countersign.CreateInput{
		Kind: countersign.KindRm, Action: action,
		Arguments:   []byte(`{"targets":["/srv/data/a","/srv/data/<b>"]}`),
		RiskReasons: []string{"recursive deletion (-r/-R)", "protected path: /srv"},
		Context:     countersign.RequestContext{User: "deploy", Host: "prod-01", Cwd: "/home/deploy", SessionID: "sess-1"},
	})
	if err != nil || !created {
		e.t.Fatalf("Create: created=%v err=%v", created, err)
	}
	return r
}

// askOld stores what the agent asked as a version that did not yet refuse
// hidden characters stored it, past the service's checks, with the
// notifications the service would give it: the messages of such a request
// still go out, rendered when they are sent, and must show it escaped.
func (e *env) askOld(in countersign.CreateInput) *countersign.Request {
	e.t.Helper()
	args, err := approval.Canonical(in.Arguments)
	if err != nil {
		e.t.Fatal(err)
	}
	if in.Preview == "" {
		in.Preview = in.Action
	}
	now := e.clock.Now()
	r := &countersign.Request{ID: countersign.NewOrderedID("req_"), AccountID: e.agent.AccountID, KeyID: e.agent.KeyID, KeyName: e.agent.KeyName,
		Kind: in.Kind, Action: in.Action, Arguments: args, ArgsHash: approval.Hash(args), Preview: in.Preview,
		PreviewHash: approval.Hash([]byte(in.Preview)), RiskReasons: in.RiskReasons, Context: in.Context,
		Status: countersign.StatusPending, CreatedAt: now, ExpiresAt: now.Add(10 * time.Minute)}
	if r.Outbox, r.Links, err = notify.NewNotifier(e.store).Announce(e.ctx, r); err != nil {
		e.t.Fatal(err)
	}
	r.Reference = countersign.NewReference()
	got, _, err := e.store.CreateRequest(e.ctx, r, 0, now, countersign.AuditEvent{Event: "created", Actor: "key:" + e.agent.KeyID, Detail: "{}"})
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

// wantRefused fails unless the service refuses in for its control or
// format characters.
func (e *env) wantRefused(in countersign.CreateInput) {
	e.t.Helper()
	_, _, err := e.svc.Create(e.ctx, e.agent, in)
	if countersign.ErrorCode(err) != countersign.EINVALID || !strings.Contains(countersign.ErrorMessage(err), "control or format characters") {
		e.t.Fatalf("Create of hidden text: %v, want it refused", err)
	}
}

// runOnce runs the worker once and wants n items claimed.
func (e *env) runOnce(n int) {
	e.t.Helper()
	got, err := e.worker.RunOnce(e.ctx)
	if err != nil || got != n {
		e.t.Fatalf("RunOnce = %d, %v; want %d items", got, err, n)
	}
}

// status returns the delivery status of the account's channel of that name.
func (e *env) status(name string) *countersign.ChannelStatus {
	e.t.Helper()
	list, err := e.admin.Status(e.ctx, "acme")
	if err != nil {
		e.t.Fatal(err)
	}
	for _, st := range list {
		if st.Channel.Name == name {
			return st
		}
	}
	e.t.Fatalf("no status of channel %s", name)
	return nil
}

// request reads a request back.
func (e *env) request(id string) *countersign.Request {
	e.t.Helper()
	r, err := e.store.Request(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// follow opens a confirm link with GET, as a mail client would, and
// returns the status and page.
func (e *env) follow(link string) (int, string) {
	e.t.Helper()
	resp, err := http.Get(link)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// press submits the confirm page's form, from the page's own origin.
func (e *env) press(link string, form url.Values) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, link, strings.NewReader(form.Encode()))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", e.public.Scheme+"://"+e.public.Host)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var tokenPattern = regexp.MustCompile(`/links/([0-9a-f]{64})`)

// noTokens fails the test when a link token shows up in the logs.
func (e *env) noTokens(texts ...string) {
	e.t.Helper()
	logs := e.logs.String()
	for _, text := range texts {
		for _, m := range tokenPattern.FindAllStringSubmatch(text, -1) {
			if strings.Contains(logs, m[1]) {
				e.t.Errorf("a link token is in the log")
			}
		}
	}
}

// receiver is an HTTP receiver that can be taken down and brought back on
// the same address.
type receiver struct {
	t       *testing.T
	addr    string
	handler http.Handler
	srv     *httptest.Server
}

func newReceiver(t *testing.T, h http.Handler) *receiver {
	r := &receiver{t: t, handler: h}
	r.srv = httptest.NewServer(h)
	r.addr = r.srv.Listener.Addr().String()
	t.Cleanup(func() { r.srv.Close() })
	return r
}

func (r *receiver) URL() string { return "http://" + r.addr }

// down closes the receiver: connections are refused.
func (r *receiver) down() { r.srv.Close() }

// up starts it again on the same address.
func (r *receiver) up() {
	r.t.Helper()
	var ln net.Listener
	var err error
	if !testutil.Wait(func() bool {
		ln, err = net.Listen("tcp", r.addr)
		return err == nil
	}, testutil.EventuallyWithin) {
		r.t.Fatalf("listen again on %s: %v", r.addr, err)
	}
	r.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: r.handler}}
	r.srv.Start()
}
