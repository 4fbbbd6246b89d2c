package postgres_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/store/postgres"
	"github.com/countersign/countersign/internal/testutil"
)

// The tests in this file run real `countersign serve` processes, built
// from ./cmd/countersign, on one PostgreSQL database, as replicas behind a
// load balancer run.

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := postgres.Migrated.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "drop the migrated schemas: %v\n", err)
		code = max(code, 1)
	}
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binary builds the countersign binary once per test run, statically, as
// users build it; the link is skipped when the last run's is up to date.
func binary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "countersign-replicas-")
		if binErr != nil {
			return
		}
		// go test puts its own GOROOT/bin first on PATH.
		goTool, err := exec.LookPath("go")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(binDir, "countersign")
		if out, err := testutil.GoBuild(goTool, "", binPath, []string{"CGO_ENABLED=0"}, "github.com/countersign/countersign/cmd/countersign"); err != nil {
			binErr = fmt.Errorf("go build ./cmd/countersign: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// lockedBuffer is a process's output, written by its goroutine and read by
// the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// process is one running `countersign serve`.
type process struct {
	t      *testing.T
	name   string
	URL    string
	cmd    *exec.Cmd
	stderr *lockedBuffer
	exited chan struct{}
	// agentKey is what the first start printed, on the replica that did
	// it.
	agentKey string
}

// freeAddr returns a 127.0.0.1 address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServe starts a replica on the database, with the secret key file
// every replica shares, and more flags, and waits until it answers
// /healthz. It is stopped (SIGTERM) when the test ends, unless killed
// before.
func startServe(t *testing.T, name, url, keyFile string, flags ...string) *process {
	t.Helper()
	addr := freeAddr(t)
	home := t.TempDir()
	p := &process{t: t, name: name, URL: "http://" + addr, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(binary(t), append([]string{"serve", "--addr", addr, "--rate-limit", "0", "--max-pending", "100", "--log-level", "warn"}, flags...)...)
	// The URL goes through the environment, as a deployment passes it.
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "COUNTERSIGN_DATA=" + filepath.Join(home, "unused"),
		"COUNTERSIGN_DATABASE_URL=" + url, "COUNTERSIGN_SECRET_KEY_FILE=" + keyFile}
	p.cmd.Stderr = p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	keys := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "agent" && f[1] == "key" {
				keys <- f[2]
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	go func() {
		p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(p.stop)

	// Healthy, or ended: either stops the wait.
	healthy := false
	if !testutil.Wait(func() bool {
		select {
		case <-p.exited:
			return true
		default:
		}
		resp, err := http.Get(p.URL + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		healthy = resp.StatusCode == http.StatusOK
		return healthy
	}, testutil.EventuallyWithin) {
		t.Fatalf("%s is not healthy after %s:\n%s", name, testutil.EventuallyWithin, p.stderr)
	}
	if !healthy {
		t.Fatalf("%s exited at start: %s", name, p.stderr)
	}
	select {
	case p.agentKey = <-keys:
	case <-time.After(100 * time.Millisecond): // not the first start (a wait for a line that may not come)
	}
	return p
}

// stop ends the process with SIGTERM, and kills it when it does not end
// (failing the test).
func (p *process) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	testutil.ReceiveOr(p.t, p.exited, p.name+"'s exit after SIGTERM", func() {
		p.cmd.Process.Kill()
		<-p.exited
	})
}

// kill ends the process at once, as a crash or an OOM kill does.
func (p *process) kill() {
	p.cmd.Process.Kill()
	<-p.exited
}

// waiters reads the replica's countersign_waiters gauge.
func (p *process) waiters() int {
	p.t.Helper()
	resp, err := http.Get(p.URL + "/metrics")
	if err != nil {
		p.t.Fatalf("%s /metrics: %v", p.name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "countersign_waiters "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int(n)
		}
	}
	p.t.Fatalf("%s: no countersign_waiters in /metrics", p.name)
	return 0
}

// waitForWaiters blocks until the replica holds n long polls, so that the
// decision that follows must wake a parked waiter.
func (p *process) waitForWaiters(n int) {
	p.t.Helper()
	if !testutil.Wait(func() bool { return p.waiters() == n }, testutil.EventuallyWithin) {
		p.t.Fatalf("%s holds %d waiters, want %d", p.name, p.waiters(), n)
	}
}

// replicaPair starts two replicas on a fresh schema and returns them with
// an agent key and an approver token.
func replicaPair(t *testing.T) (a, b *process, agentKey, token string) {
	t.Helper()
	url := postgres.Migrated.SchemaURL(t)
	keyFile := filepath.Join(t.TempDir(), "secret.key")
	if out, err := exec.Command(binary(t), "secret-key", "create", keyFile).CombinedOutput(); err != nil {
		t.Fatalf("secret-key create: %v %q", err, out)
	}
	a = startServe(t, "replica A", url, keyFile)
	if a.agentKey == "" {
		t.Fatalf("replica A printed no agent key on the first start")
	}
	b = startServe(t, "replica B", url, keyFile)
	if b.agentKey != "" {
		t.Fatalf("replica B did a first start too")
	}
	cmd := exec.Command(binary(t), "token", "create", "--database-url", url, "--secret-key-file", keyFile, "--approver", "admin", "--json")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	out, err := cmd.Output()
	var tok struct{ Token string }
	if err != nil || json.Unmarshal(out, &tok) != nil || !strings.HasPrefix(tok.Token, "cst_") {
		t.Fatalf("token create: %v %q", err, out)
	}
	return a, b, a.agentKey, tok.Token
}

// TestServeReplicas: two real servers on one database. An agent waits on
// one, the human decides on the other, the wait answers.
func TestServeReplicas(t *testing.T) {
	a, b, key, token := replicaPair(t)
	for i, pair := range [][2]*process{{a, b}, {b, a}, {a, b}} {
		waitOn, decideOn := pair[0], pair[1]
		agent := client.New(waitOn.URL, key)
		r := createOn(t, agent, i)
		res := waitAsync(t.Context(), agent, r.ID, 50*time.Second)
		waitOn.waitForWaiters(1)
		if _, err := client.New(decideOn.URL, token).Decide(t.Context(), r.ID, client.Decision{Decision: "approve"}); err != nil {
			t.Fatalf("decide on %s: %v", decideOn.name, err)
		}
		decided := time.Now()
		got := answer(t, res)
		if got.err != nil || got.r.Status != "approved" {
			t.Fatalf("wait on %s = %+v, %v; want approved", waitOn.name, got.r, got.err)
		}
		t.Logf("decision on %s to answer on %s: %v", decideOn.name, waitOn.name, got.at.Sub(decided))
		// The approval is used once, on either replica.
		if c, err := client.New(decideOn.URL, key).Consume(t.Context(), r.ID); err != nil || c.Status != "consumed" {
			t.Fatalf("consume on %s: %+v, %v", decideOn.name, c, err)
		}
		if _, err := agent.Consume(t.Context(), r.ID); !isStatus(err, http.StatusConflict) {
			t.Fatalf("second consume on %s: %v, want 409", waitOn.name, err)
		}
	}
}

// isStatus reports whether err is the server's answer with that status.
func isStatus(err error, status int) bool {
	var ce *client.Error
	return errors.As(err, &ce) && ce.Status == status
}

// TestServeReplicaKilled: the replica an agent waits on is killed; the
// agent asks the other replica and gets its answer, whether the decision
// came while it was away or after.
func TestServeReplicaKilled(t *testing.T) {
	a, b, key, token := replicaPair(t)
	agentA, agentB := client.New(a.URL, key), client.New(b.URL, key)
	approverB := client.New(b.URL, token)
	early, late := createOn(t, agentA, 1), createOn(t, agentA, 2)
	resEarly := waitAsync(t.Context(), agentA, early.ID, 50*time.Second)
	resLate := waitAsync(t.Context(), agentA, late.ID, 50*time.Second)
	a.waitForWaiters(2)

	a.kill()
	for _, res := range []<-chan waitResult{resEarly, resLate} {
		if got := answer(t, res); !errors.Is(got.err, client.ErrUnreachable) {
			t.Fatalf("wait on the killed replica = %+v, %v; want unreachable", got.r, got.err)
		}
	}
	// Decided while the agent was between replicas: the retry answers at
	// once.
	if _, err := approverB.Decide(t.Context(), early.ID, client.Decision{Decision: "approve"}); err != nil {
		t.Fatalf("decide on B: %v", err)
	}
	if got := answer(t, waitAsync(t.Context(), agentB, early.ID, 50*time.Second)); got.err != nil || got.r.Status != "approved" {
		t.Fatalf("retried wait on B = %+v, %v; want approved", got.r, got.err)
	}
	// Decided after the retry parked on B.
	res := waitAsync(t.Context(), agentB, late.ID, 50*time.Second)
	b.waitForWaiters(1)
	if _, err := approverB.Decide(t.Context(), late.ID, client.Decision{Decision: "deny", Text: "not now"}); err != nil {
		t.Fatalf("decide on B: %v", err)
	}
	if got := answer(t, res); got.err != nil || got.r.Status != "denied" || got.r.Text != "not now" {
		t.Fatalf("retried wait on B = %+v, %v; want denied", got.r, got.err)
	}
	if c, err := agentB.Consume(t.Context(), early.ID); err != nil || c.Status != "consumed" {
		t.Fatalf("consume on B: %+v, %v", c, err)
	}
}

// TestServeDatabaseRestart restarts the PostgreSQL server while an agent
// waits on replica A, then decides on replica B: A's wait still answers.
// It disturbs every other user of the server, so it runs only when
// COUNTERSIGN_TEST_PG_RESTART=1 (CI sets it where the server is its own).
func TestServeDatabaseRestart(t *testing.T) {
	if os.Getenv("COUNTERSIGN_TEST_PG_RESTART") != "1" {
		t.Skip("restarts the PostgreSQL server; set COUNTERSIGN_TEST_PG_RESTART=1 to run")
	}
	a, b, key, token := replicaPair(t)
	agentA := client.New(a.URL, key)
	approverB := client.New(b.URL, token)
	r := createOn(t, agentA, 1)
	res := waitAsync(t.Context(), agentA, r.ID, 55*time.Second)
	a.waitForWaiters(1)

	began := time.Now()
	restartPostgres(t)
	t.Logf("PostgreSQL restarted in %v", time.Since(began))
	// B may need a moment to find the server again; the decision is
	// retried until it is made.
	var (
		tries int
		err   error
	)
	if !testutil.Wait(func() bool {
		tries++
		_, err = approverB.Decide(t.Context(), r.ID, client.Decision{Decision: "approve"})
		return err == nil
	}, testutil.EventuallyWithin) {
		t.Fatalf("decide on B after the restart: %v\n%s", err, b.stderr)
	}
	t.Logf("decided on B after %d tries, %v after the restart began", tries, time.Since(began))
	decided := time.Now()
	if got := answer(t, res); got.err != nil || got.r.Status != "approved" {
		t.Fatalf("wait on A across the restart = %+v, %v; want approved\nA: %s", got.r, got.err, a.stderr)
	} else {
		t.Logf("A answered %v after the decision", got.at.Sub(decided))
	}
}

// restartPostgres restarts the local cluster and waits until it takes
// connections again.
func restartPostgres(t *testing.T) {
	t.Helper()
	versions, err := os.ReadDir("/etc/postgresql")
	if err != nil || len(versions) == 0 {
		t.Fatalf("no PostgreSQL cluster in /etc/postgresql: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "pg_ctlcluster", "--skip-systemctl-redirect", versions[0].Name(), "main", "restart").CombinedOutput()
	if err != nil {
		t.Fatalf("pg_ctlcluster restart: %v\n%s", err, out)
	}
	if !testutil.Wait(func() bool {
		return exec.CommandContext(ctx, "pg_isready", "-h", "127.0.0.1", "-q").Run() == nil
	}, 60*time.Second) {
		t.Fatal("PostgreSQL did not come back within 60 s")
	}
}
