package claudehook

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/countersign/countersign"
)

// Codex is the OpenAI Codex CLI's hook protocol, `countersign hook codex`.
// Codex reads hooks.json in Claude Code's shape and calls its hooks with
// Claude Code's fields: PreToolUse and PostToolUse around a shell command,
// named Bash with tool_input {command}, and PermissionRequest where its
// own approval would ask (a command to run outside its sandbox, as Bash
// with {command, description}, or network access, as NetworkAccess).
//
// Its answers are narrower than Claude Code's, and an answer it does not
// support counts as a failed hook, after which the call goes on: so a
// PreToolUse answers deny, or allow only with an updatedInput, and
// nothing else; a PermissionRequest answers allow or deny without
// updatedInput or interrupt; continue:false is never sent.
var Codex = &Protocol{
	Agent:   countersign.AgentCodex,
	Name:    "codex",
	Read:    readCodex,
	Write:   writeCodex,
	Install: installCodex,
}

// readCodex reads a Codex hook input into Claude Code's words, which are
// Codex's own for the shell: Bash with tool_input.command.
func readCodex(data []byte, cwd string, _ func(string) string) (Event, *Input, *Call, error) {
	name, err := eventName(data)
	if err != nil {
		return EventOther, nil, nil, err
	}
	var ev Event
	switch name {
	case EventPreToolUse:
		ev = EventBefore
	case EventPermissionRequest:
		ev = EventPermission
	case EventPostToolUse:
		ev = EventAfter
	default:
		return EventOther, &Input{Event: name}, nil, nil
	}
	// Codex names no project directory apart from the call's cwd.
	in, call, err := parseCall(data, cwd, "")
	if in == nil {
		in = &Input{}
	}
	in.Event = name
	if call != nil {
		// Codex's write_stdin types into a running command unseen by
		// any hook; Codex applies an apply_patch command itself.
		call.Typed, call.Patches = true, true
	}
	if call != nil && ev != EventPermission {
		// Codex's permission_mode says whether it asks before leaving
		// its sandbox, not before each command, as Claude Code's
		// "default" does: inside the sandbox, or without one, it runs
		// a command unasked. The policy counts it as an agent that
		// does not ask, except in the prompt itself.
		call.Mode = ""
	}
	return ev, in, call, err
}

// writeCodex renders an answer as Codex reads it: JSON on standard output
// and status 0, or nothing for no answer.
func writeCodex(ev Event, in *Input, o outcome) ([]byte, int) {
	// Codex has no continue:false for PreToolUse, nor interrupt for
	// PermissionRequest: a stop is a deny whose reason says to stop.
	o.stop = false
	if o.action == Deny && strings.TrimSpace(o.reason) == "" {
		// A deny without a reason is an invalid answer, which Codex
		// ignores.
		o.reason = "countersign refused this call."
	}
	switch {
	case ev == EventBefore && o.action == Allow && o.input == nil:
		// A PreToolUse allow without a new input is unsupported: no
		// answer lets the call go on to Codex's own checks.
		return nil, ExitOK
	case ev == EventBefore && (o.action == Allow || o.action == Deny):
	case ev == EventPermission && (o.action == Allow || o.action == Deny):
		// A PermissionRequest cannot change the input: the approval
		// allows the call as it was asked, and an edited one denies.
		o = noRewrite(o, in, "Codex")
		o.input = nil
	default:
		return nil, ExitOK
	}
	return o.render(in.Event), ExitOK
}

// codexEvents are the events `hook codex install` hooks.
var codexEvents = []string{EventPreToolUse, EventPermissionRequest, EventPostToolUse}

// installCodex is `countersign hook codex install`: merge the hooks into
// Codex's hooks.json, or print them.
func installCodex(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	o := InstallOptions{Agent: "codex", Timeout: DefaultTimeout, Command: defaultCommand("codex"), Events: codexEvents}
	fs := flag.NewFlagSet("countersign hook codex install", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Settings, "hooks", "", "merge into this hooks.json (default: $CODEX_HOME/hooks.json, ~/.codex/hooks.json; a project's is .codex/hooks.json)")
	print := fs.Bool("print", false, "print the hooks block instead of writing a file")
	trust := fs.Bool("trust", false, "also mark the hooks trusted in $CODEX_HOME/config.toml, as trusting them in Codex's /hooks does")
	timeoutFlag(fs, &o.Timeout)
	fs.StringVar(&o.Command, "command", o.Command, "the command Codex runs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := wholeSeconds(o.Timeout, "hooks.json"); err != nil {
		return err
	}
	if *print {
		if o.Settings != "" || *trust {
			return errors.New("--print writes no file: leave out --hooks and --trust")
		}
		return printHooks(stdout, o)
	}
	home, err := codexHome(getenv)
	if err != nil && (o.Settings == "" || *trust) {
		return err
	}
	if o.Settings == "" {
		o.Settings = filepath.Join(home, "hooks.json")
	}
	managed := filepath.Dir(o.Settings) == codexSystemDir
	if *trust && managed {
		return fmt.Errorf("--trust: the hooks in %s are managed, which Codex trusts without it", codexSystemDir)
	}
	changed, err := MergeSettings(o.Settings, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "countersign hook: %s %s (%s)\n", changed, o.Settings, strings.Join(o.Events, ", "))
	if *trust {
		config := filepath.Join(home, "config.toml")
		n, err := trustCodexHooks(o.Settings, config, hookEntry(o, "").Command, o.Events)
		if err != nil {
			return fmt.Errorf("the hooks are installed, but not trusted: %w", err)
		}
		fmt.Fprintf(stdout, "countersign hook: %d hooks trusted in %s\n", n, config)
		return nil
	}
	if !managed {
		fmt.Fprintf(stdout, "Codex runs a new or changed hook only once it is trusted: review and trust these in Codex's /hooks (or install with --trust), or install them for every user of this machine, trusted as managed hooks, with --hooks %s.\n",
			filepath.Join(codexSystemDir, "hooks.json"))
	}
	return nil
}

// codexSystemDir holds Codex's system configuration: hooks.json there
// are managed hooks, which Codex runs without asking a user to trust them
// and a user cannot turn off.
const codexSystemDir = "/etc/codex"

// codexHome is Codex's configuration directory: CODEX_HOME, or ~/.codex.
func codexHome(getenv func(string) string) (string, error) {
	if h := getenv("CODEX_HOME"); h != "" {
		if !filepath.IsAbs(h) {
			return "", fmt.Errorf("CODEX_HOME %q is not an absolute path", h)
		}
		return h, nil
	}
	home := getenv("HOME")
	if !filepath.IsAbs(home) {
		return "", errors.New("neither CODEX_HOME nor HOME is set to an absolute path: say where hooks.json is with --hooks")
	}
	return filepath.Join(home, ".codex"), nil
}

// The lines of a Codex patch that name the files it changes.
var patchFiles = []struct{ prefix, tool string }{
	{"*** Add File: ", "Write"},
	{"*** Update File: ", "Edit"},
	{"*** Move to: ", "Write"},
	{"*** Delete File: ", ""},
}

// applyPatch judges an apply_patch command, which Codex runs itself
// instead of a program: a write of each file the patch adds, updates or
// moves to, as Write and Edit are judged, and a delete of each file it
// deletes, as rm of it is.
func (a *analyzer) applyPatch(c *cmdCtx) {
	var patch string
	switch {
	case len(c.w) > 1 && c.w[1].static:
		patch = c.w[1].val
	case len(c.w) == 1 && c.in.doc != nil:
		body, ok := heredoc(c.in.doc)
		if !ok {
			a.ask(c.subjects(), "a patch in a here-document with expansions, computed only when it runs")
			return
		}
		patch = body
	default:
		a.ask(c.subjects(), "a patch whose text is computed only when it runs")
		return
	}
	base := a.cwdOr(c.st)
	for line := range strings.Lines(patch) {
		line = strings.TrimRight(line, "\r\n")
		for _, f := range patchFiles {
			path, ok := strings.CutPrefix(line, f.prefix)
			if !ok {
				continue
			}
			if !filepath.IsAbs(path) {
				path = base + "/" + path // not cleaned: "link/.." is resolved after the link
			}
			if f.tool == "" {
				a.rm(c, []word{lit("--"), lit(path)})
			} else {
				a.add(a.pol.writePart(f.tool, path, a.call))
			}
		}
	}
	a.add(c.part(Prompt, "applies a patch"))
}
