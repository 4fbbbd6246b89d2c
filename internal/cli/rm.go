package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/countersign/countersign/internal/saferm"
)

// runRm is the rm wrapper: `countersign rm …`, or the binary invoked as rm
// through a symlink. Its exit status is its own (rm's and the seed's), so
// it reports through exitError.
func runRm(ctx context.Context, env *Env, args []string) error {
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
		return exitError{code: saferm.ExitRefused, msg: "cannot read the working directory: " + err.Error() + "; nothing was deleted"}
	}
	code := saferm.Run(ctx, &saferm.Env{
		Args: args, Stdout: env.Stdout, Stderr: env.Stderr, Getenv: env.Getenv, Cwd: cwd, Self: self,
		Terminal: isTerminal(env.Stderr), Interrupt: interrupt, Exec: syscall.Exec,
	})
	if code != 0 {
		return exitError{code: code}
	}
	return nil
}

// isTerminal reports whether w is a terminal.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
