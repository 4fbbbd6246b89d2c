package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// EnvHookStart carries the start of a hook that handed its call over, in
// Unix nanoseconds, so that the countersign binary keeps the deadline the
// hook began with.
const EnvHookStart = "COUNTERSIGN_HOOK_START"

// The small countersign-agent binary links no HTTP client: a role that
// must ask the server replaces itself with the countersign binary beside
// it, on the same arguments (and, for the hook, the same input). Only the
// calls a human decides take this path, so its cost is one program start
// against a human's seconds.

// fullBinary returns the countersign binary beside the running one.
func fullBinary() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("cannot find the countersign binary that asks the server: %v", err)
	}
	full := filepath.Join(filepath.Dir(self), "countersign")
	st, err := os.Stat(full)
	if err != nil || !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("asking the server takes the countersign binary, which is not beside %s (install both: go build -o DIR/ ./cmd/countersign ./cmd/countersign-agent)", self)
	}
	return full, nil
}

// handoff replaces the process with `countersign ROLE… ARGS…`. With input,
// the new process reads it as its standard input. It returns only on
// failure.
func handoff(role, args []string, input []byte, start time.Time) error {
	full, err := fullBinary()
	if err != nil {
		return err
	}
	env := os.Environ()
	if input != nil {
		if err := replaceStdin(input); err != nil {
			return fmt.Errorf("cannot hand the call to %s: %v", full, err)
		}
		env = append(env, EnvHookStart+"="+strconv.FormatInt(start.UnixNano(), 10))
	}
	argv := append(append([]string{"countersign"}, role...), args...)
	err = syscall.Exec(full, argv, env)
	return fmt.Errorf("cannot start %s: %v", full, err)
}

// replaceStdin makes standard input a file that holds input: a temporary
// file, removed before it is read, so that nothing is left behind.
func replaceStdin(input []byte) error {
	f, err := os.CreateTemp("", "countersign-hook-")
	if err != nil {
		return err
	}
	os.Remove(f.Name())
	defer f.Close()
	if _, err := f.Write(input); err != nil {
		return err
	}
	if _, err := f.Seek(0, 0); err != nil {
		return err
	}
	return unix.Dup2(int(f.Fd()), 0)
}

// HookStart returns when a hook began: the start a handing-over hook
// passed in EnvHookStart, when it is a time in the last hour, else now.
// A later start than the real one could only shorten the deadline.
func HookStart(getenv func(string) string, now time.Time) time.Time {
	n, err := strconv.ParseInt(getenv(EnvHookStart), 10, 64)
	if err != nil {
		return now
	}
	if t := time.Unix(0, n); !t.After(now) && now.Sub(t) < time.Hour {
		return t
	}
	return now
}
