// Command countersign-agent is the small binary for the roles in an agent's
// path: the rm wrapper (`countersign-agent rm …`, or invoked as rm through a
// symlink) and the Claude Code hook (`countersign-agent hook claude`). They
// behave exactly as in the countersign binary; this one leaves out the
// server, the stores and the MCP SDK, so that it starts in about the time of
// an empty Go program.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/countersign/countersign/internal/agent"
)

func main() {
	start := time.Now()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	env := &agent.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, Start: start}
	code := run(ctx, env, os.Args)
	stop()
	os.Exit(code)
}

// run picks the role: the binary invoked as rm is the rm wrapper; otherwise
// the first argument names it.
func run(ctx context.Context, env *agent.Env, argv []string) int {
	if agent.IsRm(argv[0]) {
		return agent.Rm(ctx, env, argv[1:])
	}
	if len(argv) < 2 {
		usage(env.Stderr)
		return 2
	}
	switch argv[1] {
	case "rm":
		return agent.Rm(ctx, env, argv[2:])
	case "hook":
		return agent.Hook(ctx, env, argv[2:])
	case "help", "-h", "--help":
		usage(env.Stderr)
		return 0
	}
	fmt.Fprintf(env.Stderr, "countersign-agent: unknown command %q (the server and the other roles are in the countersign binary)\n\n", argv[1])
	usage(env.Stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: countersign-agent rm [rm's arguments]   (or invoked as rm through a symlink)")
	fmt.Fprintln(w, "       countersign-agent hook AGENT [--timeout SECONDS] [--config FILE] [--server URL]")
	fmt.Fprintln(w, "       countersign-agent hook AGENT install [flags]")
}
