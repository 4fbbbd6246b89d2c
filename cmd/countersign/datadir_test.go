//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testutil"
)

// serviceUID is the uid of the service user in TestDataDirOwner.
const serviceUID = 65534

// TestDataDirOwner: a data directory is refused to a user who does not
// own it, with its owner named and what to do; root may work on the
// service user's directory (sudo countersign key …), and what it leaves
// there the service user can still open.
func TestDataDirOwner(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		testutil.Missing(t, "running the binary as another user needs root")
	}
	// The service user must reach the binary and the directory: the
	// test's own temporary directories are root's, 0700.
	base, err := os.MkdirTemp("", "countersign-owner-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "countersign")
	copyFile(t, binary, bin, 0o755)
	data := filepath.Join(base, "data")
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + base, "COUNTERSIGN_DATA=" + data}

	// Root's directory, to the service user: refused, nothing changed.
	if res := runAs(t, bin, 0, env, "account", "create", "acme"); res.code != 0 {
		t.Fatalf("account create as root: %+v", res)
	}
	res := runAs(t, bin, serviceUID, env, "account", "list")
	if res.code != 1 || !strings.Contains(res.stderr, "the data directory "+data+" belongs to root (uid 0), not to") ||
		!strings.Contains(res.stderr, "(uid 65534) who runs this command: run it as root (sudo countersign …), or give it a directory of its own with --data") {
		t.Fatalf("account list as uid %d on root's directory: %+v", serviceUID, res)
	}

	// The service user's directory, to root: allowed, and tightened.
	entries, _ := os.ReadDir(data)
	for _, e := range append(entries, nil) {
		p := data
		if e != nil {
			p = filepath.Join(data, e.Name())
		}
		if err := os.Lchown(p, serviceUID, serviceUID); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(data, 0o777); err != nil {
		t.Fatal(err)
	}
	if res := runAs(t, bin, 0, env, "key", "create", "--account", "acme", "--name", "laptop"); res.code != 0 ||
		!strings.Contains(res.stdout, "csk_") || !strings.Contains(res.stderr, "made it 0700") {
		t.Fatalf("key create as root on the service user's directory: %+v", res)
	}
	if fi, err := os.Stat(data); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("after root's command the directory is %v (%v), want 0700", fi.Mode().Perm(), err)
	}
	// The service user still opens everything root left there.
	if res := runAs(t, bin, serviceUID, env, "key", "list", "--account", "acme"); res.code != 0 || !strings.Contains(res.stdout, "laptop") {
		t.Fatalf("key list as the service user after root's command: %+v", res)
	}
}

// runAs runs the binary as uid to its end (at most 30 s).
func runAs(t *testing.T, bin string, uid uint32, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	var err error
	// The binary was just written, and a process another test forked
	// meanwhile may still hold it open for writing until it execs:
	// "text file busy" for an instant. Such a start is tried again.
	testutil.Wait(func() bool {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = env
		cmd.Dir = filepath.Dir(bin)
		cmd.Stdin = strings.NewReader("")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, NoSetGroups: true}}
		stdout.Reset()
		stderr.Reset()
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.WaitDelay = 5 * time.Second
		err = cmd.Run()
		return !errors.Is(err, syscall.ETXTBSY) || ctx.Err() != nil
	}, testutil.EventuallyWithin)
	res := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("countersign %q as uid %d did not end within 30 s: %+v", args, uid, res)
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("run countersign %q as uid %d: %v", args, uid, err)
	}
	return res
}

// copyFile copies src to dst with the mode perm.
func copyFile(t *testing.T, src, dst string, perm os.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
