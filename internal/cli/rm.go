package cli

import (
	"context"
	"time"

	"github.com/countersign/countersign/internal/agent"
)

// runRm is the rm wrapper: `countersign rm …`, or the binary invoked as rm
// through a symlink. Its exit status is its own (rm's and the seed's), so
// it reports through exitError.
func runRm(ctx context.Context, env *Env, args []string) error {
	return exitCode(agent.Rm(ctx, env.agent(time.Now()), args))
}

// exitCode reports a role's own exit status through exitError.
func exitCode(code int) error {
	if code != 0 {
		return exitError{code: code}
	}
	return nil
}

// agent is env as the agent-side roles see it.
func (env *Env) agent(start time.Time) *agent.Env {
	return &agent.Env{Stdin: env.Stdin, Stdout: env.Stdout, Stderr: env.Stderr, Getenv: env.Getenv, Start: start}
}
