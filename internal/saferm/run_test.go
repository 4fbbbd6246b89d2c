package saferm_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/saferm"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/countersign/countersign/internal/testutil/testserver"
)

// Run in process: the real server package over a real SQLite store behind
// httptest, and a fake exec that records what would replace the process.

// runServer is a real server on the shared test world, with the agent key
// agent of acme and an API token of alice.
type runServer struct {
	URL      string
	key      string         // agent key
	approver *client.Client // the approver's API client
}

func newRunServer(t *testing.T) *runServer {
	t.Helper()
	s := testserver.New(t, testserver.WallClock(), testserver.Config(func(_ *testserver.Server, c *server.Config) {
		c.PublicURL = &url.URL{Scheme: "https", Host: "approve.example.com"}
	}))
	return &runServer{URL: s.URL, key: s.AgentKey, approver: client.New(s.URL, s.ApproverToken)}
}

// requests returns every request of the account.
func (s *runServer) requests(t *testing.T) []*client.Request {
	t.Helper()
	list, err := s.approver.List(t.Context(), "", 500)
	if err != nil {
		t.Fatalf("list requests: %v", err)
	}
	return list
}

// decideNext waits for a pending request and decides it, in the
// background; the returned channel yields the decided request or an error.
func (s *runServer) decideNext(ctx context.Context, decision string) <-chan error {
	return s.decideNextWith(ctx, client.Decision{Decision: decision})
}

// decideNextWith is decideNext with the decision's text.
func (s *runServer) decideNextWith(ctx context.Context, d client.Decision) <-chan error {
	done := make(chan error, 1)
	go func() {
		var err error
		testutil.Wait(func() bool {
			if ctx.Err() != nil {
				err = ctx.Err()
				return true
			}
			var list []*client.Request
			if list, err = s.approver.List(ctx, "pending", 10); err != nil || len(list) == 0 {
				return err != nil
			}
			_, err = s.approver.Decide(ctx, list[0].ID, d)
			return true
		}, testutil.EventuallyWithin)
		done <- err
	}()
	return done
}

// execCall is one call of the fake exec.
type execCall struct {
	path string
	argv []string
}

// runCase is one Run in process.
type runCase struct {
	t      *testing.T
	dir    string // the working directory
	home   string
	vars   map[string]string
	stdout bytes.Buffer
	stderr bytes.Buffer
	mu     sync.Mutex
	execs  []execCall
	// interrupt, when set, is the wrapper's Ctrl-C.
	interrupt chan os.Signal
	// terminal, when set, is a fake terminal on stderr: the countdown
	// runs and writes to it beside the wrapper's messages.
	terminal *fakeTerminal
}

// fakeTerminal records what is written to it, in order, from any
// goroutine.
type fakeTerminal struct {
	mu  sync.Mutex
	out bytes.Buffer
}

func (f *fakeTerminal) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.out.Write(p)
}

func (f *fakeTerminal) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.out.String()
}

func newRunCase(t *testing.T, vars map[string]string) *runCase {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := &runCase{t: t, dir: filepath.Join(root, "work"), home: filepath.Join(root, "home"), vars: vars}
	for _, d := range []string{c.dir, c.home} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func (c *runCase) getenv(name string) string { return c.vars[name] }

// write creates a file in the working directory.
func (c *runCase) write(rel, content string) string {
	c.t.Helper()
	p := filepath.Join(c.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		c.t.Fatal(err)
	}
	return p
}

// run runs the wrapper with args (the program name excluded).
func (c *runCase) run(args ...string) int {
	c.t.Helper()
	self, err := os.Executable()
	if err != nil {
		c.t.Fatal(err)
	}
	none := filepath.Join(c.dir, "does-not-exist")
	interrupt := c.interrupt
	if interrupt == nil {
		interrupt = make(chan os.Signal)
	}
	var stderr io.Writer = &c.stderr
	if c.terminal != nil {
		stderr = c.terminal
	}
	e := &saferm.Env{Connect: connect,
		Args: args, Stdout: &c.stdout, Stderr: stderr, Getenv: c.getenv, Cwd: c.dir, Self: self,
		Interrupt: interrupt, Terminal: c.terminal != nil,
		Exec: func(path string, argv []string, env []string) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.execs = append(c.execs, execCall{path, slices.Clone(argv)})
			return nil
		},
		Load: saferm.LoadOptions{Getenv: c.getenv, Home: c.home, SystemConfig: none, SafeRmConf: none},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return saferm.Run(ctx, e)
}

// wantExec fails unless the fake exec ran once, the real rm by its
// absolute path, with argv exactly "rm" and rmArgs.
func (c *runCase) wantExec(rmArgs ...string) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.execs) != 1 {
		c.t.Fatalf("exec ran %d times, want once: %+v\nstderr: %s", len(c.execs), c.execs, c.stderr.String())
	}
	got := c.execs[0]
	if !filepath.IsAbs(got.path) || filepath.Base(got.path) != "rm" {
		c.t.Errorf("exec path %q, want an absolute path of the real rm", got.path)
	}
	if self, _ := os.Executable(); got.path == self {
		c.t.Errorf("exec path %q is the wrapper itself", got.path)
	}
	if want := append([]string{"rm"}, rmArgs...); !slices.Equal(got.argv, want) {
		c.t.Errorf("exec argv %q, want %q", got.argv, want)
	}
}

// wantNoExec fails if the fake exec ran.
func (c *runCase) wantNoExec() {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.execs) != 0 {
		c.t.Errorf("exec ran %+v, want never\nstderr: %s", c.execs, c.stderr.String())
	}
}

// The fake exec returns nil, which a real exec never does: Run then
// reports that it could not run rm and refuses. That exit status is the
// fallback's, so the tests look at the exec calls, not at it.

func TestRunPassExecsOriginalArgs(t *testing.T) {
	s := newRunServer(t)
	c := newRunCase(t, map[string]string{"CLAUDECODE": "1", "COUNTERSIGN_URL": s.URL, "COUNTERSIGN_KEY": s.key})
	c.write("one.txt", "x\n")
	c.run("-v", "one.txt")
	c.wantExec("-v", "one.txt")
	if n := len(s.requests(t)); n != 0 {
		t.Errorf("a no-risk rm made %d requests", n)
	}
}

func TestRunWrapperFlagsStripped(t *testing.T) {
	s := newRunServer(t)
	c := newRunCase(t, map[string]string{"CLAUDECODE": "1", "COUNTERSIGN_KEY": s.key})
	c.write("one.txt", "x\n")
	// --server is the wrapper's before "--"; after it, rm's.
	c.run("--server", s.URL, "one.txt", "--", "--server")
	c.wantExec("one.txt", "--", "--server")
}

func TestRunUnguardedPassesThrough(t *testing.T) {
	s := newRunServer(t)
	c := newRunCase(t, map[string]string{"COUNTERSIGN_URL": s.URL, "COUNTERSIGN_KEY": s.key})
	c.write("proj/a/b.txt", "x\n")
	c.run("-rf", "proj")
	c.wantExec("-rf", "proj")
	if n := len(s.requests(t)); n != 0 {
		t.Errorf("an unguarded rm made %d requests", n)
	}
}

func TestRunNoArgsPassesThrough(t *testing.T) {
	c := newRunCase(t, map[string]string{"CLAUDECODE": "1"})
	c.run()
	c.wantExec()
}

func TestRunHardBlockNoRequest(t *testing.T) {
	s := newRunServer(t)
	for _, op := range []string{"/", "~", ".", "..", "$HOME"} {
		c := newRunCase(t, map[string]string{"CLAUDECODE": "1", "COUNTERSIGN_URL": s.URL, "COUNTERSIGN_KEY": s.key})
		if code := c.run("-rf", op); code != saferm.ExitRefused {
			t.Errorf("rm -rf %s: exit %d, want %d", op, code, saferm.ExitRefused)
		}
		if !strings.Contains(c.stderr.String(), "refused: ") {
			t.Errorf("rm -rf %s: stderr %q", op, c.stderr.String())
		}
		c.wantNoExec()
	}
	if n := len(s.requests(t)); n != 0 {
		t.Errorf("hard blocks made %d requests", n)
	}
}

func TestRunApprovedExecsOriginalArgs(t *testing.T) {
	s := newRunServer(t)
	c := newRunCase(t, map[string]string{"CLAUDECODE": "1", "COUNTERSIGN_URL": s.URL, "COUNTERSIGN_KEY": s.key})
	c.write("proj/a.txt", "x\n")
	// A wrapper flag among rm's arguments is the wrapper's, not rm's.
	cfg := filepath.Join(c.home, "countersign.toml")
	if err := os.WriteFile(cfg, []byte("poll_timeout = \"20s\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	decided := s.decideNext(t.Context(), "approve")
	c.run("-r", "--config="+cfg, "proj", "-v")
	if err := <-decided; err != nil {
		t.Fatalf("decide: %v", err)
	}
	c.wantExec("-r", "proj", "-v")
	list := s.requests(t)
	if len(list) != 1 || list[0].Status != "consumed" || list[0].Kind != "rm" || list[0].Action != "rm -r proj -v" {
		t.Errorf("requests after the approval: %+v", list)
	}
}

// On a terminal the countdown line is cleared before the outcome is
// said: the outcome starts a line of its own, not the countdown's.
func TestRunTerminalClearsCountdownBeforeOutcome(t *testing.T) {
	for _, decision := range []string{"approve", "deny"} {
		t.Run(decision, func(t *testing.T) {
			s := newRunServer(t)
			c := newRunCase(t, map[string]string{"CLAUDECODE": "1", "COUNTERSIGN_URL": s.URL, "COUNTERSIGN_KEY": s.key})
			c.terminal = &fakeTerminal{}
			c.write("proj/a.txt", "x\n")
			decided := s.decideNext(t.Context(), decision)
			c.run("-r", "proj")
			if err := <-decided; err != nil {
				t.Fatalf("decide: %v", err)
			}
			out := c.terminal.String()
			ref := s.requests(t)[0].Reference
			word := map[string]string{"approve": " approved by ", "deny": " denied by "}[decision]
			at := strings.Index(out, "countersign rm: "+ref+word)
			if at < 0 {
				t.Fatalf("no outcome line for %s in %q", ref, out)
			}
			if !strings.Contains(out[:at], "(Ctrl-C cancels)") {
				t.Fatalf("no countdown before the outcome in %q", out)
			}
			if before := out[:at]; !strings.HasSuffix(before, "\r\x1b[K") {
				t.Errorf("the outcome follows %q, not the clearing of the countdown line", before[max(0, len(before)-40):])
			}
		})
	}
}

// The answer a wrapper prints comes from the server: its hidden
// characters and line breaks are shown as escapes, not obeyed by the
// terminal.
func TestRunAnswerShownEscaped(t *testing.T) {
	s := newRunServer(t)
	c := newRunCase(t, map[string]string{"CLAUDECODE": "1", "COUNTERSIGN_URL": s.URL, "COUNTERSIGN_KEY": s.key})
	c.write("proj/a.txt", "x\n")
	decided := s.decideNextWith(t.Context(), client.Decision{Decision: "deny", Text: "no\x1b[2K\rok\u202e\u200b\nsecond"})
	c.run("-r", "proj")
	if err := <-decided; err != nil {
		t.Fatalf("decide: %v", err)
	}
	c.wantNoExec()
	out := c.stderr.String()
	if strings.ContainsAny(out, "\x1b\r\u202e\u200b") || !strings.Contains(out, `: no\x1b[2K\x0dok\u202e\u200b\nsecond; nothing was deleted`) {
		t.Errorf("the answer is not shown escaped on one line:\n%q", out)
	}
}

func TestRunDeniedNoExec(t *testing.T) {
	s := newRunServer(t)
	c := newRunCase(t, map[string]string{"CLAUDECODE": "1", "COUNTERSIGN_URL": s.URL, "COUNTERSIGN_KEY": s.key})
	c.write("proj/a.txt", "x\n")
	decided := s.decideNext(t.Context(), "deny")
	if code := c.run("-rf", "proj"); code != saferm.ExitRefused {
		t.Errorf("denied: exit %d, want 1", code)
	}
	if err := <-decided; err != nil {
		t.Fatalf("decide: %v", err)
	}
	c.wantNoExec()
}

// TestRunGarbageAnswers: whatever a broken server or proxy answers, the
// wrapper refuses with a message naming the server and never runs rm.
func TestRunGarbageAnswers(t *testing.T) {
	answers := []struct {
		name, contentType, body string
		status                  int
	}{
		{"200 not JSON", "text/plain", "this is not JSON", http.StatusOK},
		{"500 HTML", "text/html", "<html><body><h1>500 Internal Server Error</h1></body></html>", http.StatusInternalServerError},
		{"502 HTML", "text/html", "<html><body>Bad Gateway</body></html>", http.StatusBadGateway},
		{"200 null", "application/json", "null", http.StatusOK},
		{"200 empty object", "application/json", "{}", http.StatusOK},
		{"200 empty", "application/json", "", http.StatusOK},
	}
	for _, a := range answers {
		t.Run(a.name, func(t *testing.T) {
			var hits sync.Map
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Store(r.Method+" "+r.URL.Path, true)
				w.Header().Set("Content-Type", a.contentType)
				w.WriteHeader(a.status)
				fmt.Fprint(w, a.body)
			}))
			defer ts.Close()
			c := newRunCase(t, map[string]string{"CLAUDECODE": "1", "COUNTERSIGN_URL": ts.URL, "COUNTERSIGN_KEY": "csk_x"})
			c.write("proj/a.txt", "x\n")
			if code := c.run("-rf", "proj"); code != saferm.ExitRefused {
				t.Errorf("exit %d, want %d", code, saferm.ExitRefused)
			}
			c.wantNoExec()
			if _, asked := hits.Load("POST /api/v1/requests"); !asked {
				t.Errorf("the wrapper never asked the server")
			}
			if se := c.stderr.String(); !strings.Contains(se, ts.URL) || !strings.Contains(se, "nothing was deleted") {
				t.Errorf("stderr does not name the server and say nothing was deleted:\n%s", se)
			}
			if _, err := os.Stat(filepath.Join(c.dir, "proj", "a.txt")); err != nil {
				t.Errorf("the file is gone: %v", err)
			}
		})
	}
}

// TestRunServerNeverAnswers: a server that takes the connection and never
// answers does not hold the wrapper: Ctrl-C ends it, whether it is asking
// or using the approval, and nothing is deleted.
func TestRunServerNeverAnswers(t *testing.T) {
	s := newRunServer(t)
	target, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	for _, hang := range []string{"create", "consume"} {
		t.Run(hang, func(t *testing.T) {
			arrived, unblock := make(chan struct{}, 1), make(chan struct{})
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if hang == "create" && r.Method == http.MethodPost && r.URL.Path == "/api/v1/requests" ||
					hang == "consume" && strings.HasSuffix(r.URL.Path, "/consume") {
					arrived <- struct{}{}
					<-unblock
					return
				}
				proxy.ServeHTTP(w, r)
			}))
			defer ts.Close()
			defer close(unblock) // before Close, which waits for the held handler
			c := newRunCase(t, map[string]string{"CLAUDECODE": "1", "COUNTERSIGN_URL": ts.URL, "COUNTERSIGN_KEY": s.key})
			c.interrupt = make(chan os.Signal, 1)
			c.write("proj/a.txt", "x\n")
			if hang == "consume" {
				decided := s.decideNext(t.Context(), "approve")
				defer func() { <-decided }()
			}
			go func() {
				<-arrived
				c.interrupt <- os.Interrupt
			}()
			done := make(chan int, 1)
			go func() { done <- c.run("-rf", "proj") }()
			if code := testutil.Receive(t, done, "the wrapper's end on Ctrl-C while the server held its call"); code != saferm.ExitStopped {
				t.Errorf("exit %d, want %d\nstderr: %s", code, saferm.ExitStopped, c.stderr.String())
			}
			c.wantNoExec()
			if se := c.stderr.String(); !strings.Contains(se, "interrupted") || !strings.Contains(se, "nothing was deleted") {
				t.Errorf("stderr:\n%s", se)
			}
		})
	}
}

// TestRunInterruptWhileConsuming: Ctrl-C that comes while the approval is
// being used, after the wait, still stops the wrapper before rm runs.
func TestRunInterruptWhileConsuming(t *testing.T) {
	s := newRunServer(t)
	target, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	interrupt := make(chan os.Signal, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/consume") {
			interrupt <- os.Interrupt
		}
		proxy.ServeHTTP(w, r)
	}))
	defer ts.Close()
	c := newRunCase(t, map[string]string{"CLAUDECODE": "1", "COUNTERSIGN_URL": ts.URL, "COUNTERSIGN_KEY": s.key})
	c.interrupt = interrupt
	c.write("proj/a.txt", "x\n")
	decided := s.decideNext(t.Context(), "approve")
	if code := c.run("-rf", "proj"); code != saferm.ExitStopped {
		t.Errorf("exit %d, want %d\nstderr: %s", code, saferm.ExitStopped, c.stderr.String())
	}
	<-decided
	c.wantNoExec()
}

// TestRunGarbageWhileWaiting: the server takes the request, then a broken
// proxy answers the long poll with an HTML error page. The wrapper refuses,
// never runs rm, and withdraws the request so that nobody approves a
// delete that will not happen.
func TestRunGarbageWhileWaiting(t *testing.T) {
	s := newRunServer(t)
	target, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprint(w, "<html><body>Bad Gateway</body></html>")
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer ts.Close()
	c := newRunCase(t, map[string]string{"CLAUDECODE": "1", "COUNTERSIGN_URL": ts.URL, "COUNTERSIGN_KEY": s.key})
	c.write("proj/a.txt", "x\n")
	if code := c.run("-rf", "proj"); code != saferm.ExitRefused {
		t.Errorf("exit %d, want %d", code, saferm.ExitRefused)
	}
	c.wantNoExec()
	list := s.requests(t)
	if len(list) != 1 || list[0].Status != "cancelled" {
		t.Errorf("requests after the garbage answer: %d, %q, want one cancelled\nstderr: %s", len(list), list[0].Status, c.stderr.String())
	}
}

// BenchmarkRunNoRisk is the wrapper's own work on `rm one-file` in a
// guarded session — configuration, real rm lookup, guard, assessment — up
// to the exec, in process: what the wrapper adds to the real rm beyond
// starting the binary.
func BenchmarkRunNoRisk(b *testing.B) {
	root, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "one-file"), []byte("x\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	vars := map[string]string{"CLAUDECODE": "1", "HOME": root}
	getenv := func(name string) string { return vars[name] }
	none := filepath.Join(root, "none")
	execs := 0
	e := &saferm.Env{Connect: connect,
		Args: []string{"one-file"}, Stdout: io.Discard, Stderr: io.Discard, Getenv: getenv, Cwd: root, Self: self,
		Exec: func(string, []string, []string) error { execs++; return nil },
		Load: saferm.LoadOptions{Getenv: getenv, Home: root, SystemConfig: none, SafeRmConf: none},
	}
	for b.Loop() {
		saferm.Run(context.Background(), e)
	}
	if execs == 0 {
		b.Fatal("the real rm was never run")
	}
}

// The hook's COUNTERSIGN_AGENT names the coding agent in the wrapper's
// request, so that the server files it in that agent's session; a name
// that is no coding agent's drops the session too, so that the delete
// meets no other agent's window.
func TestRunNamesTheHooksAgent(t *testing.T) {
	for _, tt := range []struct{ agent, want, session string }{
		{"codex", "codex", "codex:s1"},
		{"someone", "", ""},
		{"", "", "s1"},
	} {
		t.Run(tt.agent, func(t *testing.T) {
			s := newRunServer(t)
			c := newRunCase(t, map[string]string{"CLAUDECODE": "1", "COUNTERSIGN_URL": s.URL, "COUNTERSIGN_KEY": s.key,
				saferm.EnvSession: "s1", saferm.EnvAgent: tt.agent})
			c.write("proj/a.txt", "x\n")
			decided := s.decideNext(t.Context(), "deny")
			c.run("-r", "proj")
			if err := <-decided; err != nil {
				t.Fatalf("decide: %v", err)
			}
			list := s.requests(t)
			if len(list) != 1 || list[0].Context.Agent != tt.want || list[0].Context.SessionID != tt.session {
				t.Errorf("the request's agent and session: %+v; want %q and %q", list[0].Context, tt.want, tt.session)
			}
		})
	}
}
