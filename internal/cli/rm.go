package cli

import (
	"context"
	"time"

	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/agent"
	"github.com/countersign/countersign/internal/saferm"
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

// agent is env as the agent-side roles see it, asking the server over
// HTTP.
func (env *Env) agent(start time.Time) *agent.Env {
	return &agent.Env{Stdin: env.Stdin, Stdout: env.Stdout, Stderr: env.Stderr, Getenv: env.Getenv, Start: start,
		Connect: func(serverURL, credential string) saferm.Server { return client.New(serverURL, credential) }}
}
