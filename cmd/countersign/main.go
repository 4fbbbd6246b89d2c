// Command countersign is the approval gateway for AI agents: the server,
// and the client roles that ask it. The role is the first argument.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/countersign/countersign/internal/agent"
	"github.com/countersign/countersign/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, cli.OSEnv(), role(os.Args))
	stop()
	os.Exit(code)
}

// role returns the arguments for cli.Run: the binary invoked as "rm"
// (through a symlink) is the rm wrapper; otherwise the first argument names
// the role.
func role(argv []string) []string {
	if agent.IsRm(argv[0]) {
		return append([]string{"rm"}, argv[1:]...)
	}
	return argv[1:]
}
