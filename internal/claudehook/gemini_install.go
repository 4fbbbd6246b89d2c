package claudehook

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// GeminiInstallOptions are the flags of `countersign hook gemini install`.
type GeminiInstallOptions struct {
	Settings string        // --settings FILE: merge into it; "" prints what would be written
	Policy   string        // --policy FILE: the policy file that lets countersign ask once
	Timeout  time.Duration // --timeout: the hook's timeout, passed to the hook too
	Command  string        // --command: how Gemini CLI starts the hook
}

// geminiEvents are the events the hook is installed for.
var geminiEvents = []string{GeminiBeforeTool, GeminiAfterTool}

// geminiGatedTools are the tools Gemini CLI asks about itself, which the
// installed policy file allows so that countersign's hook, which runs
// before Gemini CLI's own check, is the one that asks: a human approves
// once, in the countersign inbox, not again at Gemini CLI's prompt.
// web_fetch and MCP tools are left to Gemini CLI's prompt: countersign's
// defaults leave them to the agent too.
var geminiGatedTools = []string{"run_shell_command", "write_file", "replace"}

// geminiPolicy is the policy file install writes. Priority 1 of the user
// tier (4.001) is above every built-in rule and below every rule of the
// user's own, so that a rule the user wrote still denies or asks. Plan
// mode keeps its read-only rules.
func geminiPolicy() []byte {
	return []byte(`# Written by countersign hook gemini install. countersign's BeforeTool hook
# decides these tools: it allows, refuses, or asks a human through the
# countersign server, before Gemini CLI's own check. This rule lets the
# calls it let through run without Gemini CLI asking a second time.
# Remove this file together with the hook in settings.json.
[[rule]]
toolName = ["` + strings.Join(geminiGatedTools, `", "`) + `"]
decision = "allow"
priority = 1
modes = ["default", "autoEdit"]
allowRedirection = true
`)
}

// InstallGemini is `countersign hook gemini install`: print the hooks
// block for Gemini CLI's settings.json and the policy file, or merge the
// block into the given settings and write the policy file.
func InstallGemini(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	o, err := parseGeminiInstall(args, stderr, getenv)
	if err != nil {
		return err
	}
	if o.Settings == "" {
		hooks := &object{vals: map[string]json.RawMessage{}}
		for _, ev := range geminiEvents {
			hooks.set(ev, []geminiGroup{{Matcher: "*", Hooks: []geminiHook{geminiEntry(o)}}})
		}
		root := &object{vals: map[string]json.RawMessage{}}
		root.setObject("hooks", hooks)
		out, err := root.indent()
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "# merge into ~/.gemini/settings.json:\n%s\n# write to %s:\n%s", out, o.Policy, geminiPolicy())
		return err
	}
	// The hook first, the policy after: a policy that lets the tools run
	// unasked must never be there without the hook that decides them.
	changed, warn, err := MergeGeminiSettings(o.Settings, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "countersign hook: %s %s (%s)\n", changed, o.Settings, strings.Join(geminiEvents, ", "))
	switch {
	case o.Policy == "":
		fmt.Fprintf(stdout, "countersign hook: no policy file written: %s is not the user's settings, and a policy file would let %s run unasked in every project; Gemini CLI asks itself after countersign there (and refuses them without a terminal), unless --policy FILE writes one anyway\n",
			o.Settings, strings.Join(geminiGatedTools, ", "))
	default:
		if err := writePolicy(o.Policy); err != nil {
			return fmt.Errorf("%s: %w", o.Policy, err)
		}
		fmt.Fprintf(stdout, "countersign hook: %s lets %s run without Gemini CLI's own prompt, decided by the hook\n", o.Policy, strings.Join(geminiGatedTools, ", "))
	}
	if warn != "" {
		fmt.Fprintf(stdout, "countersign hook: %s\n", warn)
	}
	return nil
}

// parseGeminiInstall reads install's flags.
func parseGeminiInstall(args []string, stderr io.Writer, getenv func(string) string) (GeminiInstallOptions, error) {
	o := GeminiInstallOptions{Timeout: DefaultTimeout, Command: geminiCommand()}
	fs := flag.NewFlagSet("countersign hook gemini install", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Settings, "settings", "", "merge into this settings.json (~/.gemini/settings.json, or a project's .gemini/settings.json) instead of printing")
	fs.StringVar(&o.Policy, "policy", "", "the policy file to write (default ~/.gemini/policies/countersign.toml with the user's settings, none with a project's; Gemini CLI reads no project's policies)")
	timeoutFlag(fs, &o.Timeout, "the hook's timeout in seconds (default 600; Gemini CLI's own default of 60 is too short for a human)")
	fs.StringVar(&o.Command, "command", o.Command, "the command Gemini CLI runs")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := wholeSeconds(o.Timeout, "settings.json"); err != nil {
		return o, err
	}
	if strings.TrimSpace(o.Command) == "" {
		return o, errors.New("--command: want the command that starts the hook")
	}
	if o.Policy != "" {
		return o, nil
	}
	home := getenv("GEMINI_CLI_HOME") // Gemini CLI's own override of the home directory
	if home == "" {
		home = getenv("HOME")
	}
	if home == "" {
		return o, errors.New("--policy: no HOME to find ~/.gemini/policies in; name the file")
	}
	// The user's policy file applies to every project: it is written by
	// default only with the hook in the user's settings, which run in
	// every project too.
	user := filepath.Join(home, ".gemini")
	if o.Settings == "" || samePath(o.Settings, filepath.Join(user, "settings.json")) {
		o.Policy = filepath.Join(user, "policies", "countersign.toml")
	}
	return o, nil
}

// samePath reports whether two paths name the same file, as written or
// through links.
func samePath(a, b string) bool {
	absA, errA := filepath.Abs(a)
	absB, errB := filepath.Abs(b)
	if errA == nil && errB == nil && absA == absB {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// geminiCommand is how Gemini CLI starts the hook: the binary the Claude
// Code hook would use, with the gemini role.
func geminiCommand() string {
	return defaultCommand("gemini")
}

// geminiHook is a hook entry of Gemini CLI's settings.json. Its timeout
// is in milliseconds.
type geminiHook struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Command string `json:"command"`
	Timeout int64  `json:"timeout"`
}

// geminiGroup is a matcher group of Gemini CLI's settings.json.
type geminiGroup struct {
	Matcher string       `json:"matcher"`
	Hooks   []geminiHook `json:"hooks"`
}

// geminiEntry is the hook entry: the command passes the timeout on, so
// that the hook answers before Gemini CLI gives up on it (a timed-out hook
// lets the call run).
func geminiEntry(o GeminiInstallOptions) geminiHook {
	secs := int64(o.Timeout / time.Second)
	return geminiHook{Name: geminiHookName, Type: "command", Command: fmt.Sprintf("%s --timeout %d", o.Command, secs), Timeout: secs * 1000}
}

// MergeGeminiSettings merges the hook into Gemini CLI's settings.json,
// creating it when missing. Everything already there is kept, in its
// order; an existing countersign entry is updated in place instead of
// added twice. The file is replaced atomically. It returns what it did,
// and a warning when Gemini CLI will not read the policy file.
func MergeGeminiSettings(path string, o GeminiInstallOptions) (did, warn string, err error) {
	data, mode, err := readSettings(path)
	if err != nil {
		return "", "", err
	}
	root, err := parseObject(data)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", path, err)
	}
	hooks, err := root.child("hooks")
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", path, err)
	}
	did = "installed in"
	for _, ev := range geminiEvents {
		updated, err := mergeGeminiEvent(hooks, ev, o)
		if err != nil {
			return "", "", fmt.Errorf("%s: hooks.%s: %w", path, ev, err)
		}
		if updated {
			did = "updated in"
		}
	}
	root.setObject("hooks", hooks)
	out, err := root.indent()
	if err != nil {
		return "", "", err
	}
	if raw, ok := root.get("policyPaths"); ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("[]")) && !bytes.Contains(raw, mustJSON(o.Policy)) {
		warn = fmt.Sprintf("%s sets policyPaths, which Gemini CLI reads instead of ~/.gemini/policies: add %s to it, or Gemini CLI asks again after countersign", path, o.Policy)
	}
	return did, warn, writeAtomic(path, out, mode)
}

// mergeGeminiEvent adds the hook to one event's matcher groups, or
// updates the countersign entry already there.
func mergeGeminiEvent(hooks *object, ev string, o GeminiInstallOptions) (updated bool, err error) {
	want := geminiEntry(o)
	ours := func(entry *object) bool {
		var cmd string
		c, _ := entry.get("command")
		return json.Unmarshal(c, &cmd) == nil && isGeminiCommand(cmd)
	}
	return mergeEntry(hooks, ev, ours, func(entry *object) json.RawMessage {
		entry.set("name", want.Name)
		entry.set("type", want.Type)
		entry.set("command", want.Command)
		entry.set("timeout", want.Timeout)
		return entry.marshal()
	}, mustJSON(geminiGroup{Matcher: "*", Hooks: []geminiHook{want}}))
}

// writePolicy writes the policy file, whole: it is countersign's alone.
func writePolicy(path string) error {
	want := geminiPolicy()
	if got, err := os.ReadFile(path); err == nil && bytes.Equal(got, want) {
		return nil
	}
	return writeAtomic(path, want, 0o644)
}
