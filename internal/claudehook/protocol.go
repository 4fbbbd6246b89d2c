package claudehook

import (
	"context"
	"fmt"
	"io"

	"github.com/countersign/countersign"
)

// An Event is what an agent calls its hook for, in any agent's words.
type Event int

const (
	// EventOther is an event the hook does not answer.
	EventOther Event = iota
	// EventBefore comes before a tool runs: Claude Code's and Codex's
	// PreToolUse, Gemini CLI's BeforeTool, Copilot CLI's preToolUse.
	EventBefore
	// EventPermission stands for the agent's own permission prompt:
	// PermissionRequest, permissionRequest.
	EventPermission
	// EventAfter comes after a tool ran: PostToolUse, AfterTool,
	// postToolUse.
	EventAfter
)

// A Protocol is one coding agent's hook protocol. Every agent's call is
// read into Claude Code's words (its tool names and tool_input fields), so
// that one policy (the [hook] rules, protected paths, the shell analysis,
// windows) applies to every agent by the same names.
type Protocol struct {
	// Agent names the agent in a request's context.agent
	// (countersign.Agent*).
	Agent string
	// Name is the word after "hook" on the command line.
	Name string
	// Read reads one hook input: its event and, for the events the hook
	// answers, the call in Claude Code's words, with in.Event the agent's
	// own name of the event. An error with a nil Input blocks the call by
	// the exit status, with the error on standard error; an error with an
	// Input is answered as a deny of its event.
	Read func(data []byte, cwd string, getenv func(string) string) (Event, *Input, *Call, error)
	// Write renders the answer to an event: what goes to standard output,
	// and the exit status.
	Write func(ev Event, in *Input, o outcome) ([]byte, int)
	// Install writes the agent's configuration so that it calls the hook.
	Install func(args []string, stdout, stderr io.Writer, getenv func(string) string) error
}

// Claude is Claude Code's hook protocol.
var Claude = &Protocol{
	Agent:   countersign.AgentClaudeCode,
	Name:    "claude",
	Read:    readClaude,
	Write:   writeClaude,
	Install: Install,
}

// Protocols are the agents the hook speaks for, by Name.
var Protocols = map[string]*Protocol{Claude.Name: Claude, Codex.Name: Codex, Gemini.Name: Gemini}

// readClaude reads a Claude Code hook input.
func readClaude(data []byte, cwd string, getenv func(string) string) (Event, *Input, *Call, error) {
	name, err := eventName(data)
	if err != nil {
		return EventOther, nil, nil, err
	}
	ev := EventOther
	switch name {
	case EventPreToolUse:
		ev = EventBefore
	case EventPermissionRequest:
		ev = EventPermission
	case EventPostToolUse, EventPostToolUseFailure:
		in, err := readAfter(data, name)
		return EventAfter, in, nil, err
	default:
		return ev, &Input{Event: name}, nil, nil
	}
	in, call, err := parseCall(data, cwd, getenv("CLAUDE_PROJECT_DIR"))
	if in == nil {
		in = &Input{}
	}
	in.Event = name
	return ev, in, call, err
}

// writeClaude renders an answer as Claude Code reads it: JSON on standard
// output and status 0.
func writeClaude(_ Event, in *Input, o outcome) ([]byte, int) {
	return o.render(in.Event), ExitOK
}

// RunProtocol is `countersign hook NAME`: read one event of the agent p,
// answer it, exit.
func RunProtocol(ctx context.Context, e *Env, p *Protocol) int {
	opts, err := ParseOptions(p.Name, e.Args, e.Stderr)
	if err != nil {
		fmt.Fprintf(e.Stderr, "countersign hook %s: %v; the call is blocked\n", p.Name, err)
		return ExitBlock
	}
	data, err := readInputBy(e.Stdin, e.Start.Add(opts.Timeout-Margin(opts.Timeout)))
	if err != nil {
		fmt.Fprintf(e.Stderr, "countersign: %v; the call is blocked\n", err)
		return ExitBlock
	}
	ev, in, call, err := p.Read(data, e.Cwd, e.Getenv)
	if call != nil && p.Agent != countersign.AgentClaudeCode {
		call.Agent = p.Agent
	}
	var o outcome
	switch {
	case ev == EventAfter && in != nil:
		// After the fact the hook cannot block: its answer is nothing,
		// whatever happens.
		if err != nil {
			fmt.Fprintf(e.Stderr, "countersign: cannot report what ran: %v\n", err)
		} else {
			reportRan(ctx, e, opts, p, in)
		}
		return ExitOK
	case err != nil && in == nil:
		// Without the event there is no answer of the agent's to give:
		// the exit status blocks the call, with this message as the
		// reason.
		fmt.Fprintf(e.Stderr, "countersign: %v; the call is blocked\n", err)
		return ExitBlock
	case err != nil:
		o = deny("countersign: cannot check this call, so it is refused: %v", err)
	case ev == EventBefore || ev == EventPermission:
		o = decide(ctx, e, opts, p, in, call)
	default:
		return ExitOK
	}
	out, code := p.Write(ev, in, o)
	if _, err := e.Stdout.Write(out); err != nil {
		// A status 2 without a reason is a failed hook to Codex, which
		// then runs the call: the reason goes to standard error.
		fmt.Fprintf(e.Stderr, "countersign: cannot write the answer: %v; the call is blocked\n", err)
		return ExitBlock
	}
	return code
}
