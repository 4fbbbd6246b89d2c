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
		Connect: connectAgent}
}

// connectAgent is the server as the hooks and the rm wrapper ask it. Both
// run an approval's action as approved, an approver's edit included (the
// hook answers the edited input, the wrapper deletes only the targets
// kept), so they accept edited approvals.
func connectAgent(serverURL, credential string) saferm.Server {
	c := client.New(serverURL, credential)
	c.AcceptEdits = true
	return c
}
