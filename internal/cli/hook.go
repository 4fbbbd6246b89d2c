package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/countersign/countersign/internal/claudehook"
)

// hookUsage is the usage of `countersign hook`.
const hookUsage = `usage: countersign hook claude [--timeout SECONDS] [--config FILE] [--server URL]
       countersign hook claude install [--settings FILE] [--timeout SECONDS] [--command CMD] [--events PreToolUse,PermissionRequest]`

// runHook is `countersign hook claude`, the Claude Code hook, and `countersign
// hook claude install`. The hook's exit status is its own (Claude Code reads
// 0 and 2), so it reports through exitError.
func runHook(ctx context.Context, env *Env, args []string) error {
	start := time.Now()
	if len(args) == 0 || args[0] != "claude" {
		return fmt.Errorf("%w: %s", ErrUsage, hookUsage)
	}
	if len(args) > 1 && args[1] == "install" {
		return claudehook.Install(args[2:], env.Stdout, env.Stderr)
	}
	cwd, _ := os.Getwd() // only for an input without cwd; "" leaves paths unresolved
	code := claudehook.Run(ctx, &claudehook.Env{
		Args: args[1:], Stdin: env.Stdin, Stdout: env.Stdout, Stderr: env.Stderr,
		Getenv: env.Getenv, Cwd: cwd, Start: start,
	})
	if code != 0 {
		return exitError{code: code}
	}
	return nil
}
