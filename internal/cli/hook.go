package cli

import (
	"context"
	"time"

	"github.com/countersign/countersign/internal/agent"
)

// runHook is `countersign hook claude`, the Claude Code hook, and `countersign
// hook claude install`. The hook's exit status is its own (Claude Code reads
// 0 and 2), so it reports through exitError.
func runHook(ctx context.Context, env *Env, args []string) error {
	// A call the small countersign-agent binary handed over keeps the
	// deadline it started with.
	return exitCode(agent.Hook(ctx, env.agent(agent.HookStart(env.Getenv, time.Now())), args))
}
