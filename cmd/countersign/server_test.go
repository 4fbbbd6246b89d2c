package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/countersign/countersign/internal/testutil"
)

// server is a running `countersign serve` process.
type server struct {
	t      *testing.T
	cmd    *exec.Cmd
	URL    string
	stdout *syncBuffer
	stderr *syncBuffer
	done   chan struct{}
	state  *os.ProcessState // set when done is closed
}

var listeningRE = regexp.MustCompile(`msg="countersign listening".*\baddr=127\.0\.0\.1:(\d+)\b`)

// serve starts the server on a free port of 127.0.0.1 on the bed's data
// directory and waits until it logs its address. The process is killed when
// the test ends, if it still runs.
func (b *bed) serve(args ...string) *server {
	b.t.Helper()
	return startServer(b.t, "", b.env(), append([]string{"serve", "--addr", "127.0.0.1:0", "--data", b.data}, args...))
}

// startServer runs the binary with args (serve and its flags) in dir with
// env, and waits until it logs its address. The process is killed when the
// test ends, if it still runs.
func startServer(t *testing.T, dir string, env, args []string) *server {
	t.Helper()
	s := &server{t: t, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(binary, args...)
	s.cmd.Dir, s.cmd.Env = dir, env
	s.cmd.Stdout, s.cmd.Stderr = s.stdout, s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start countersign serve: %v", err)
	}
	go func() {
		s.cmd.Wait()
		s.state = s.cmd.ProcessState
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			s.cmd.Process.Kill()
			<-s.done
		}
	})
	var m []string
	ended := false
	listening := testutil.Wait(func() bool {
		if m = listeningRE.FindStringSubmatch(s.stderr.String()); m != nil {
			return true
		}
		select {
		case <-s.done:
			ended = true
		default:
		}
		return ended
	}, testutil.EventuallyWithin)
	switch {
	case m != nil:
		s.URL = "http://127.0.0.1:" + m[1]
		return s
	case ended:
		t.Fatalf("countersign serve ended before listening: %v\nstdout: %s\nstderr: %s", s.state, s.stdout, s.stderr)
	case !listening:
		t.Fatalf("countersign serve did not log its address within %s\nstderr: %s", testutil.EventuallyWithin, s.stderr)
	}
	return nil
}

// stop sends sig and waits (bounded) for the process to end.
func (s *server) stop(sig syscall.Signal) *os.ProcessState {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal %v: %v", sig, err)
	}
	testutil.ReceiveOr(s.t, s.done, fmt.Sprintf("the end of countersign serve after %v", sig),
		func() { s.t.Logf("stderr: %s", s.stderr) })
	return s.state
}

// stopClean stops the server with SIGTERM and fails unless it exits 0.
func (s *server) stopClean() {
	s.t.Helper()
	if st := s.stop(syscall.SIGTERM); st.ExitCode() != 0 {
		s.t.Fatalf("countersign serve after SIGTERM: %v, want exit 0\nstderr: %s", st, s.stderr)
	}
}

// waitStdout waits until the server's stdout holds want.
func (s *server) waitStdout(want string) string {
	s.t.Helper()
	var out string
	if !testutil.Wait(func() bool { out = s.stdout.String(); return strings.Contains(out, want) }, testutil.EventuallyWithin) {
		s.t.Fatalf("stdout of countersign serve lacks %q:\n%s", want, out)
	}
	return out
}

// waitWaiters waits until the server holds n long polls, read from its
// metrics, so that a test decides only once the agent really waits.
func (s *server) waitWaiters(n int) {
	s.t.Helper()
	var body []byte
	if !testutil.Wait(func() bool {
		var held bool
		held, body = s.holds(n)
		return held
	}, testutil.EventuallyWithin) {
		s.t.Fatalf("the server never held %d waiters; metrics:\n%s", n, body)
	}
}

// holds reports whether the server holds n long polls now, and its metrics.
func (s *server) holds(n int) (bool, []byte) {
	code, body := call(s.t, "GET", s.URL+"/metrics", "", "")
	return code == http.StatusOK && strings.Contains(string(body), "countersign_waiters "+strconv.Itoa(n)+"\n"), body
}

// firstStart is what the first start prints.
type firstStart struct {
	approver, password, key string
}

var (
	firstStartRE = regexp.MustCompile(`countersign: first start\. Created the account "default" with:\n\n` +
		`  approver   (\S+)\n  password   (\S+)\n  agent key  (\S+)\n`)
	passwordRE = regexp.MustCompile(`^[a-z0-9]{5}(-[a-z0-9]{5}){3}$`)
	agentKeyRE = regexp.MustCompile(`^csk_[a-z2-7]{52}$`)
	tokenRE    = regexp.MustCompile(`^cst_[a-z2-7]{52}$`)
	// secretRE matches any agent key or approver token.
	secretRE    = regexp.MustCompile(`cs[kt]_[a-z2-7]{8,}`)
	referenceRE = regexp.MustCompile(`^[2-9A-Z]{3}-[2-9A-Z]{3}$`)
)

// parseFirstStart reads the secrets of the first start from the server's
// stdout and checks that they are printed once.
func (s *server) parseFirstStart() firstStart {
	s.t.Helper()
	out := s.waitStdout("Keep them now.")
	m := firstStartRE.FindAllStringSubmatch(out, -1)
	if len(m) != 1 {
		s.t.Fatalf("the first start printed its secrets %d times, want once:\n%s", len(m), out)
	}
	fs := firstStart{approver: m[0][1], password: m[0][2], key: m[0][3]}
	if fs.approver != "admin" || !passwordRE.MatchString(fs.password) || !agentKeyRE.MatchString(fs.key) {
		s.t.Fatalf("first start printed approver %q, password %q, key %q", fs.approver, fs.password, fs.key)
	}
	if n := strings.Count(out, fs.key); n != 1 {
		s.t.Errorf("the agent key appears %d times on stdout, want 1", n)
	}
	return fs
}

// assertNoSecrets fails if the log holds any credential, or any of the
// given secrets.
func assertNoSecrets(t *testing.T, log string, secrets ...string) {
	t.Helper()
	if m := secretRE.FindString(log); m != "" {
		t.Errorf("the log holds a credential %q:\n%s", m, log)
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(log, s) {
			t.Errorf("the log holds the secret %q:\n%s", s, log)
		}
	}
}
