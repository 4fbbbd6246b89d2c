// Package agent runs the roles that stand in an agent's path: the rm
// wrapper and the Claude Code hook. Every command an agent runs pays for the
// wrapper, and every tool call for the hook, so this package and what it
// imports stay lean: no server, no store, no MCP SDK. Both the countersign
// binary and the small countersign-agent binary call it.
package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/countersign/countersign/internal/claudehook"
	"github.com/countersign/countersign/internal/saferm"
)

// Env is what a role sees of its process, so that tests run it in process.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	// Start is when the process started; the hook's deadline counts from it.
	Start time.Time
}

// HookUsage is the usage of the hook role.
const HookUsage = `usage: countersign hook claude [--timeout SECONDS] [--config FILE] [--server URL]
       countersign hook claude install [--settings FILE] [--timeout SECONDS] [--command CMD] [--events PreToolUse,PermissionRequest]`

// Rm is the rm wrapper: `countersign rm …`, or a binary invoked as rm
// through a symlink. It returns rm's exit status (and the seed's).
func Rm(ctx context.Context, env *Env, args []string) int {
	// Ctrl-C must reach the wrapper, which cancels the request on the
	// server, rather than cancel the context under it.
	ctx = context.WithoutCancel(ctx)
	interrupt := make(chan os.Signal, 1)
	signal.Notify(interrupt, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(interrupt)

	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	cwd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(env.Stderr, "countersign rm: cannot read the working directory: %v; nothing was deleted\n", err)
		return saferm.ExitRefused
	}
	return saferm.Run(ctx, &saferm.Env{
		Args: args, Stdout: env.Stdout, Stderr: env.Stderr, Getenv: env.Getenv, Cwd: cwd, Self: self,
		Terminal: IsTerminal(env.Stderr), Interrupt: interrupt, Exec: syscall.Exec,
		LineStart: saferm.ParentStart(),
	})
}

// Hook is `countersign hook claude` and `countersign hook claude install`.
// It returns the hook's exit status (Claude Code reads 0 and 2); usage
// errors are 2.
func Hook(ctx context.Context, env *Env, args []string) int {
	if len(args) == 0 || args[0] != "claude" {
		fmt.Fprintf(env.Stderr, "countersign hook: %s\n", HookUsage)
		return 2
	}
	if len(args) > 1 && args[1] == "install" {
		err := claudehook.Install(args[2:], env.Stdout, env.Stderr)
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return 0
		}
		fmt.Fprintf(env.Stderr, "countersign hook: %v\n", err)
		return 1
	}
	cwd, _ := os.Getwd() // only for an input without cwd; "" leaves paths unresolved
	return claudehook.Run(ctx, &claudehook.Env{
		Args: args[1:], Stdin: env.Stdin, Stdout: env.Stdout, Stderr: env.Stderr,
		Getenv: env.Getenv, Cwd: cwd, Start: env.Start,
	})
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// IsRm reports whether argv[0] names the rm wrapper: the binary invoked
// as "rm" through a symlink.
func IsRm(argv0 string) bool { return filepath.Base(argv0) == "rm" }
