// Package testserver runs the countersign server for a test, built the one
// way every test outside the server's composition root builds it: a
// testutil.World (SQLite in t.TempDir() unless an option says otherwise),
// the approval service on the World's clock, the real HTTP handler of
// package server behind a real listener on 127.0.0.1. A test changes what
// it needs with options, and signs a browser in with SignIn.
//
// It imports server and approval, so the tests inside those packages
// cannot use it; their external tests (package server_test) can.
package testserver

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/metrics"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/store/postgres"
	"github.com/countersign/countersign/internal/store/postgres/pgtest"
	"github.com/countersign/countersign/internal/store/sqlite"
	"github.com/countersign/countersign/internal/testutil"
)

// Server is a countersign server running for one test; it stops when the
// test ends. The embedded World holds the accounts acme (agent key a,
// approver alice) and other (key x, approver bob), the clock and Admin.
type Server struct {
	*testutil.World
	// Store is the server's store, whatever its backend (the World's
	// Store is its SQLite handle, nil on another backend).
	Store   countersign.Store
	Hub     *approval.Hub
	Service *approval.Service
	Server  *server.Server
	Metrics *metrics.Registry
	URL     string              // where the listener answers: http://127.0.0.1:PORT
	Public  *url.URL            // the server's PublicURL (default: URL)
	Logs    *testutil.LogBuffer // everything the server logged, at debug level

	AgentKey      string // the secret of acme's agent key a (World.KeyA)
	ApproverToken string // an API token of alice in acme

	b       build
	log     *slog.Logger
	handler atomic.Pointer[http.Handler] // the current server's: Restart swaps it
}

// Option changes how New builds the server.
type Option func(*build)

type build struct {
	start     time.Time
	clock     countersign.Clock // the approval service's; nil: the World's
	store     countersign.Store
	replicaOf *Server
	postgres  bool
	approval  []func(*Server, *approval.Config)
	config    []func(*Server, *server.Config)
	listen    func(net.Listener) net.Listener
	localhost bool
	serve     bool
	quiet     bool
}

// At starts the World's clock at start instead of testutil.Start: near
// time.Now for a server whose sessions run on the wall clock.
func At(start time.Time) Option { return func(b *build) { b.start = start } }

// WallClock gives the approval service the system's clock instead of the
// World's: for a test whose requests must age with real time, as a
// browser, another process or the server's sessions see it, rather than
// with a clock the test moves.
func WallClock() Option { return Clock(countersign.SystemClock{}) }

// Clock gives the approval service clock instead of the World's: for a
// test whose requests must both age with real time and jump ahead when
// the test says (the wall clock plus what the test skips), which neither
// the World's clock nor WallClock does.
func Clock(clock countersign.Clock) Option { return func(b *build) { b.clock = clock } }

// Approval changes the approval service's configuration; set may read
// the World and s.Store.
func Approval(set func(s *Server, c *approval.Config)) Option {
	return func(b *build) { b.approval = append(b.approval, set) }
}

// Config changes the server's configuration. set runs after the service
// exists and the listener listens, so that it may read s.Service, s.URL
// and the World (a gateway built on the service, a public URL on the
// listener's port); s.Server is not made yet.
func Config(set func(s *Server, c *server.Config)) Option {
	return func(b *build) { b.config = append(b.config, set) }
}

// Listener wraps the loopback listener the server answers on.
func Listener(wrap func(net.Listener) net.Listener) Option {
	return func(b *build) { b.listen = wrap }
}

// Localhost makes the public URL, and URL, http://localhost:PORT, the
// listener's port: passkeys need a host name, which an IP address is not.
func Localhost() Option { return func(b *build) { b.localhost = true } }

// Serve serves with the server's own Serve, as countersign serve does
// (its timeouts, its shutdown), instead of httptest; Restart then cannot
// swap the server.
func Serve() Option { return func(b *build) { b.serve = true } }

// Quiet discards what the server logs instead of keeping it in Logs: for
// a benchmark, whose figures the debug log would change.
func Quiet() Option { return func(b *build) { b.quiet = true } }

// OnStore runs the server, and makes the World, on a store the test
// opened (and closes after the server: open it before New), migrated and
// empty.
func OnStore(store countersign.Store) Option { return func(b *build) { b.store = store } }

// Postgres runs the server on PostgreSQL: a schema of its own
// (pgtest.SchemaURL), migrated. It skips or fails the test as pgtest does
// when the server is unreachable.
func Postgres() Option { return func(b *build) { b.postgres = true } }

// ReplicaOf runs another replica of first: a server with its own hub,
// service and listener on store, a second handle on first's database, and
// first's World, whose accounts and credentials it therefore knows.
func ReplicaOf(first *Server, store countersign.Store) Option {
	return func(b *build) { b.replicaOf, b.store = first, store }
}

// New starts a server. Unless an option says otherwise, its PublicURL is
// the listener's own http URL, it has argon2id slots of its own (a
// parallel test's sign-ins do not make this one's wait), and the approval
// service runs on the World's clock.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	b := build{start: testutil.Start}
	for _, o := range opts {
		o(&b)
	}
	s := &Server{Logs: &testutil.LogBuffer{}, b: b}
	s.log = slog.New(slog.NewTextHandler(s.Logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if b.quiet {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.World, s.Store = b.world(t)
	s.AgentKey = s.KeyA
	if b.replicaOf != nil {
		s.ApproverToken = b.replicaOf.ApproverToken
	} else {
		s.ApproverToken = s.Token("alice", "acme")
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if b.listen != nil {
		ln = b.listen(ln)
	}
	s.URL = "http://" + ln.Addr().String()
	s.Public = &url.URL{Scheme: "http", Host: ln.Addr().String()}
	if b.localhost {
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		s.Public.Host = "localhost:" + port
		s.URL = s.Public.String()
	}
	s.start(t)
	if b.serve {
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Server.Serve(ctx, ln) }()
		t.Cleanup(func() {
			// A connection a client dialled and never used keeps the
			// shutdown waiting 5 s (net/http counts it as idle only
			// then): close the default client's idle connections first.
			http.DefaultTransport.(*http.Transport).CloseIdleConnections()
			stop()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	} else {
		ts := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			(*s.handler.Load()).ServeHTTP(w, r)
		})}}
		ts.Start()
		t.Cleanup(ts.Close)
		// Runs before ts.Close: ends open event streams and long polls,
		// which Close waits for.
		t.Cleanup(func() { s.Hub.Close() })
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", s.Logs.String())
		}
	})
	return s
}

// start makes the hub, the service and the server on s.Store, and serves
// the server's handler.
func (s *Server) start(t testing.TB) {
	t.Helper()
	s.Hub, s.Metrics = approval.NewHub(), metrics.NewRegistry()
	var acfg approval.Config
	for _, set := range s.b.approval {
		set(s, &acfg)
	}
	var clock countersign.Clock = s.Clock
	if s.b.clock != nil {
		clock = s.b.clock
	}
	s.Service = approval.New(s.Store, clock, s.Hub, acfg, s.log, approval.NewMetrics(s.Metrics, s.Hub))
	cfg := server.Config{PublicURL: s.Public, PasswordSlots: identity.NewHashSlots(2)}
	for _, set := range s.b.config {
		set(s, &cfg)
	}
	s.Public = cfg.PublicURL
	srv, err := server.New(cfg, s.Service, &identity.Authenticator{Store: s.Store}, s.Metrics, s.log)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	s.Server = srv
	h := srv.Handler()
	s.handler.Store(&h)
}

// Restart is a restart of the server's process on store, its database
// opened again: the old hub closes (its waiters answer), and a new hub,
// service and server, made with New's options, answer on the same
// listener. The World's Admin and Auth move to store.
func (s *Server) Restart(t testing.TB, store countersign.Store) {
	t.Helper()
	if s.b.serve {
		t.Fatal("testserver: Restart of a server started with Serve")
	}
	s.Hub.Close()
	s.Store, s.Admin.Store, s.Auth.Store = store, store, store
	if db, ok := store.(*sqlite.DB); ok && s.World.Store != nil {
		s.World.Store = db
	}
	s.start(t)
}

// world makes the World the build asks for and returns it with its store.
func (b *build) world(t testing.TB) (*testutil.World, countersign.Store) {
	t.Helper()
	switch {
	case b.replicaOf != nil:
		return b.replicaOf.World, b.store
	case b.store != nil:
		return testutil.NewWorldOn(t, b.store, b.start), b.store
	case b.postgres:
		u := pgtest.SchemaURL(t)
		db, err := postgres.Open(t.Context(), u, nil)
		if err != nil {
			t.Fatalf("open PostgreSQL: %v", err)
		}
		t.Cleanup(func() { db.Close() })
		return testutil.NewWorldOn(t, db, b.start), db
	}
	w := testutil.NewWorldAt(t, b.start)
	return w, w.Store
}

// SignIn signs the approver username in through the sign-in form, with
// testutil.Password, as a browser of the public URL would (its Host and
// Origin, sent to URL), and returns the session cookie the server set.
// c sends the form (nil: a client of its own); its cookie jar, if it has
// one, keeps the cookie when the public URL is the listener's.
func (s *Server) SignIn(t testing.TB, c *http.Client, username string) *http.Cookie {
	t.Helper()
	if c == nil {
		c = &http.Client{}
	}
	// The answer is a redirect to the inbox; its cookie is what matters.
	noFollow := *c
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	form := url.Values{"username": {username}, "password": {testutil.Password}, "next": {"/approvals"}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL+"/signin", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = s.Public.Host
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.Public.Scheme+"://"+s.Public.Host)
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatalf("sign in %s: %v", username, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in %s: status %d, want 303; body:\n%s", username, resp.StatusCode, body)
	}
	for _, ck := range resp.Cookies() {
		if strings.HasSuffix(ck.Name, "countersign_session") && ck.Value != "" {
			return ck
		}
	}
	t.Fatalf("sign in %s: no session cookie in %q", username, resp.Header.Values("Set-Cookie"))
	return nil
}

// Browser returns a client signed in as the approver username: its cookie
// jar holds the session, and it follows no redirect, so that a test sees
// each answer as the server gave it. The public URL must be the
// listener's (the default): a jar sends no cookie of another host.
func (s *Server) Browser(t testing.TB, username string) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar, Timeout: testutil.EventuallyWithin,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	s.SignIn(t, c, username)
	return c
}
