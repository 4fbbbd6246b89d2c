// Package agent runs the roles that stand in an agent's path: the rm
// wrapper and the Claude Code hook. Every command an agent runs pays for the
// wrapper, and every tool call for the hook, so this package and what it
// imports stay lean: no server, no store, no MCP SDK. Both the countersign
// binary and the small countersign-agent binary call it.
package agent

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
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
	// Connect returns the server to ask: client.New in the countersign
	// binary. Nil in countersign-agent, which hands what needs asking to
	// the countersign binary beside it.
	Connect func(serverURL, credential string) saferm.Server
}

// HookUsage is the usage of the hook role.
func HookUsage() string {
	return `usage: countersign hook AGENT [--timeout SECONDS] [--config FILE] [--server URL]
       countersign hook AGENT install [flags; -h lists them]
AGENT is the coding agent that calls the hook: ` + strings.Join(slices.Sorted(maps.Keys(claudehook.Protocols)), ", ")
}

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
	e := &saferm.Env{
		Args: args, Stdout: env.Stdout, Stderr: env.Stderr, Getenv: env.Getenv, Cwd: cwd, Self: self,
		Terminal: IsTerminal(env.Stderr), Interrupt: interrupt, Exec: syscall.Exec,
		LineStart: saferm.ParentStart(), Connect: env.Connect,
	}
	if env.Connect == nil {
		e.Handoff = func() error { return handoff([]string{"rm"}, args, nil, env.Start) }
	}
	return saferm.Run(ctx, e)
}

// Hook is `countersign hook claude` and `countersign hook claude install`.
// It returns the hook's exit status (Claude Code reads 0 and 2); usage
// errors are 2.
func Hook(ctx context.Context, env *Env, args []string) int {
	var p *claudehook.Protocol
	if len(args) > 0 {
		p = claudehook.Protocols[args[0]]
	}
	if p == nil {
		fmt.Fprintf(env.Stderr, "countersign hook: %s\n", HookUsage())
		return 2
	}
	if len(args) > 1 && args[1] == "install" {
		err := p.Install(args[2:], env.Stdout, env.Stderr, env.Getenv)
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return 0
		}
		fmt.Fprintf(env.Stderr, "countersign hook: %v\n", err)
		return 1
	}
	cwd, _ := os.Getwd() // only for an input without cwd; "" leaves paths unresolved
	e := &claudehook.Env{
		Args: args[1:], Stdin: env.Stdin, Stdout: env.Stdout, Stderr: env.Stderr,
		Getenv: env.Getenv, Cwd: cwd, Start: env.Start, Connect: env.Connect,
	}
	if env.Connect == nil {
		// The input is kept, to be read again by the countersign binary
		// if the call must be asked. The hook reads no more than this.
		input, err := io.ReadAll(io.LimitReader(env.Stdin, claudehook.MaxInput+1))
		if err != nil {
			fmt.Fprintf(env.Stderr, "countersign: read the hook input: %v; the call is blocked\n", err)
			return claudehook.ExitBlock
		}
		e.Stdin = bytes.NewReader(input)
		e.Handoff = func() error { return handoff([]string{"hook", p.Name}, args[1:], input, env.Start) }
	}
	return claudehook.RunProtocol(ctx, e, p)
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
