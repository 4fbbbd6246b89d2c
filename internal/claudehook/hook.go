// Package claudehook is the Claude Code hook, `countersign hook claude`.
// Claude Code runs it before tool calls (PreToolUse) and before its
// permission prompts (PermissionRequest) with the call as JSON on standard
// input. A policy — the [hook] rules of the configuration file over
// built-in defaults, with the rm wrapper's risk assessment for every delete
// inside a Bash command — allows the call at once, denies it, leaves it to
// Claude Code's own prompt, or asks a human through the countersign server
// and answers with the decision, always before the hook's timeout. After
// a call a human approved ran (PostToolUse, PostToolUseFailure), the hook
// reports the call as it ran, so that the server records whether it is
// what was approved; that answer is always nothing.
//
// A call the policy allows locally touches no network: the path from
// standard input to the answer reads the configuration file, parses the
// command and nothing else.
package claudehook

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/internal/saferm"
)

// DefaultTimeout is Claude Code's default timeout of a command hook.
const DefaultTimeout = 600 * time.Second

// Exit statuses. Claude Code reads stdout on 0; on 2 it blocks a
// PreToolUse call with stderr as the reason.
const (
	ExitOK    = 0
	ExitBlock = 2
)

// Env is what the hook sees of its process, so that tests run it in
// process.
type Env struct {
	Args   []string // after "hook claude"
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	Cwd    string    // the process's working directory, for an input without cwd
	Start  time.Time // when the hook started: the timeout counts from here
	Load   saferm.LoadOptions
	// Connect returns the server to ask (client.New in the countersign
	// binary). Nil in a binary without an HTTP client: a call that needs
	// asking is handed to Handoff instead.
	Connect func(serverURL, credential string) saferm.Server
	// Handoff replaces the process with one that can ask, on the same
	// input; it returns only on failure.
	Handoff func() error
	// ReportAll: every call that ran is reported to the server, not only
	// those marked on disk when the hook asked (the HTTP hook, which runs
	// inside the server).
	ReportAll bool
}

// Options are the hook's flags.
type Options struct {
	Timeout time.Duration // --timeout: the hook's timeout in settings.json
	Config  string        // --config FILE
	Server  string        // --server URL
}

// ParseOptions reads the hook's flags. --timeout takes seconds, as
// settings.json does, or a duration such as 10m.
func ParseOptions(name string, args []string, stderr io.Writer) (Options, error) {
	o := Options{Timeout: DefaultTimeout}
	fs := flag.NewFlagSet("countersign hook "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Func("timeout", "the hook's timeout in settings.json, in seconds (default 600)", func(v string) error {
		d, err := parseTimeout(v)
		o.Timeout = d
		return err
	})
	fs.StringVar(&o.Config, "config", "", "the configuration file")
	fs.StringVar(&o.Server, "server", "", "the countersign server's URL")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return o, nil
}

// parseTimeout reads seconds or a Go duration.
func parseTimeout(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		n, nerr := strconv.Atoi(v)
		if nerr != nil {
			return 0, errors.New("want seconds, such as 600")
		}
		d = time.Duration(n) * time.Second
	}
	if d <= 0 || d > 24*time.Hour {
		return 0, errors.New("want a positive number of seconds, at most a day")
	}
	return d, nil
}

// Margin is how long before the timeout the hook answers: a tenth of it,
// at most 10 s, so that the answer, not Claude Code's timeout, ends the
// call.
func Margin(timeout time.Duration) time.Duration {
	return min(10*time.Second, timeout/10)
}

// Run is `countersign hook claude`: read one event, answer it, exit.
func Run(ctx context.Context, e *Env) int { return RunProtocol(ctx, e, Claude) }

// decide loads the policy and returns the answer to the call of the
// agent p. Every failure denies.
func decide(ctx context.Context, e *Env, opts Options, p *Protocol, in *Input, call *Call) outcome {
	load := e.Load
	if load.Getenv == nil {
		load.Getenv = e.Getenv
	}
	cfg, err := saferm.LoadConfig(saferm.Invocation{ConfigFile: opts.Config, ServerURL: opts.Server}, load)
	if err != nil {
		return deny("countersign: the configuration cannot be read, so every call is refused until it is fixed: %v", err)
	}
	rules, err := ParseRules(cfg.Hook)
	if err != nil {
		return deny("countersign: the [hook] rules in %s are broken, so every call is refused until they are fixed: %v", configName(cfg), err)
	}
	deadline := e.Start.Add(opts.Timeout - Margin(opts.Timeout))
	hard := e.Start.Add(opts.Timeout - Margin(opts.Timeout)/2)
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	pol := &Policy{Rules: rules, Config: cfg, Wrappers: WrapperLinks(e.Getenv("PATH"))}
	v := pol.Decide(dctx, call)
	switch {
	case v.Action == Allow && v.Default:
		// A built-in default is not reason enough to answer for a human:
		// "allow" would skip Claude Code's own permission rules and prompt
		// (for a read outside the project, say), and a static list of
		// harmless-looking commands cannot know every option that runs a
		// program (git -c core.fsmonitor=…, less +!…). Such calls are left
		// to Claude Code; only a [hook] rule or a human's approval allows.
		return outcome{action: Prompt}
	case v.Action == Allow:
		return outcome{action: Allow, reason: "countersign policy: " + strings.Join(v.Reasons, "; ")}
	case v.Action == Prompt:
		return outcome{action: Prompt}
	case v.Unchecked:
		return deny("countersign could not check this command, so it is refused: %s. Nothing ran; run it as several shorter, simpler commands.", strings.Join(v.Reasons, "; "))
	case v.Action == Deny:
		return deny("countersign refused this call: %s. This is the policy, not a human's decision: do not try the same another way; if it is really needed, ask the user to do it.", strings.Join(v.Reasons, "; "))
	}
	k := &asker{cfg: cfg, stderr: e.Stderr, deadline: deadline, hard: hard}
	if cfg.ServerURL != "" && cfg.AgentKey != "" {
		if e.Connect == nil {
			// This binary has no HTTP client (countersign-agent): the
			// countersign binary asks, on the same input. Nothing has
			// been answered yet.
			err := errors.New("this binary cannot ask the server")
			if e.Handoff != nil {
				err = e.Handoff()
			}
			return deny("countersign: this call needs a human's approval (%s), but %v. The call was not run; tell the user.", strings.Join(v.Reasons, "; "), err)
		}
		k.c = e.Connect(cfg.ServerURL, cfg.AgentKey)
	}
	o := k.ask(ctx, p, in, call, v)
	if o.action == Allow && o.edit != nil {
		// The wait may have used the time up to deadline: checking the
		// edit may take until hard.
		ectx, cancel := context.WithDeadline(ctx, hard)
		o = applyEdit(ectx, pol, p, in, call, o)
		cancel()
	}
	if o.action == Allow {
		markAsked(e, p, in)
	}
	return o
}
