package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testutil"
)

// The tests in this package run the real binary as a process against real
// data directories. TestMain builds it once, the way a user does.

// binary is the path of the countersign binary built for these tests, and
// agentBinary that of the small countersign-agent binary, which the rm
// wrapper's tests run as rm, as the README installs it.
var binary, agentBinary string

// minTTLSymbol is the variable that holds the shortest request TTL the
// server accepts.
const minTTLSymbol = "github.com/countersign/countersign/internal/cli.minRequestTTL"

// argonCostSymbol is the variable that holds the cost of new password
// hashes.
const argonCostSymbol = "github.com/countersign/countersign/internal/identity.argonCost"

func TestMain(m *testing.M) {
	// The tests mostly wait on the processes they run.
	testutil.WaitingParallel(4)
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "countersign-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "create the build directory:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "countersign")
	goTool, err := findGo()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The test runs in cmd/countersign, so "." is ./cmd/countersign. The
	// design promises a static build: build it that way.
	// The differences from a release: the shortest request TTL is 1s,
	// not 10s, so that TestSafeRmExpired waits 1 s for an expiry, and
	// passwords are hashed cheaply, so that each first start does not
	// spend a third of a second of the processor on its approver's.
	// Both binaries build at once.
	agentBinary = filepath.Join(dir, "countersign-agent")
	builds := []struct {
		what string
		out  string
		args []string
	}{
		{"./cmd/countersign", binary, []string{"-ldflags", "-X " + minTTLSymbol + "=1s -X " + argonCostSymbol + "=test", "."}},
		{"./cmd/countersign-agent", agentBinary, []string{"../countersign-agent"}},
	}
	failed := make([]string, len(builds))
	var wg sync.WaitGroup
	for i, b := range builds {
		wg.Go(func() {
			if out, err := testutil.GoBuild(goTool, "", b.out, []string{"CGO_ENABLED=0"}, b.args...); err != nil {
				failed[i] = fmt.Sprintf("go build %s: %v\n%s", b.what, err, out)
			}
		})
	}
	wg.Wait()
	for _, f := range failed {
		if f != "" {
			fmt.Fprint(os.Stderr, f)
			return 1
		}
	}
	return m.Run()
}

// findGo returns the go tool: from PATH (go test puts its own GOROOT/bin
// first there), else from $GOROOT.
func findGo() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	if root := os.Getenv("GOROOT"); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no go tool in PATH or GOROOT: cannot build the binary under test")
}

// syncBuffer is a bytes.Buffer that a process's output goroutine and the
// test can use at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// bed is one test's world: a data directory and a home directory, so that
// no user's approver.toml or environment leaks into a test.
type bed struct {
	t    *testing.T
	data string
	home string
}

func newBed(t *testing.T) *bed {
	t.Helper()
	root := t.TempDir()
	// The data directory does not exist yet: the first start creates it.
	return &bed{t: t, data: filepath.Join(root, "data"), home: filepath.Join(root, "home")}
}

// env is a minimal environment for a process of the binary, plus extra.
func (b *bed) env(extra ...string) []string {
	return append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + b.home,
		"XDG_CONFIG_HOME=" + filepath.Join(b.home, ".config"),
	}, extra...)
}

// result is how a command ended.
type result struct {
	stdout, stderr string
	code           int
}

// run runs the binary to its end (at most 30 s) with the environment.
func (b *bed) run(env []string, args ...string) result {
	b.t.Helper()
	return runBinary(b.t, binary, env, args...)
}

// runBinary runs the program at path to its end (at most 30 s).
func runBinary(t *testing.T, path string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader("")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	res := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s %q did not end within 30 s\nstdout: %s\nstderr: %s", filepath.Base(path), args, res.stdout, res.stderr)
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("run %s %q: %v", filepath.Base(path), args, err)
	}
	return res
}

// mustRun runs the binary and fails the test unless it exits 0.
func (b *bed) mustRun(env []string, args ...string) string {
	b.t.Helper()
	res := b.run(env, args...)
	if res.code != 0 {
		b.t.Fatalf("countersign %q: exit %d\nstdout: %s\nstderr: %s", args, res.code, res.stdout, res.stderr)
	}
	return res.stdout
}

func TestRole(t *testing.T) {
	t.Parallel()
	tests := []struct {
		argv []string
		want []string
	}{
		{[]string{"countersign", "serve", "--addr", "x"}, []string{"serve", "--addr", "x"}},
		{[]string{"/usr/local/bin/countersign"}, []string{}},
		{[]string{"/home/u/bin/rm", "-rf", "build"}, []string{"rm", "-rf", "build"}},
		{[]string{"rm"}, []string{"rm"}},
		{[]string{"./rm", "--", "-f"}, []string{"rm", "--", "-f"}},
		{[]string{"/usr/bin/rmdir", "x"}, []string{"x"}},
	}
	for _, tt := range tests {
		if got := role(tt.argv); !slices.Equal(got, tt.want) {
			t.Errorf("role(%q) = %q, want %q", tt.argv, got, tt.want)
		}
	}
}
