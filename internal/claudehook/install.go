package claudehook

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/internal/saferm"
)

// InstallOptions are the flags of `countersign hook claude install`.
type InstallOptions struct {
	// Agent is the protocol's Name, the word after "hook" in the
	// command; "" is claude.
	Agent    string
	Settings string        // --settings FILE: merge into it; "" prints the block
	Timeout  time.Duration // --timeout: the hook's timeout, passed to the hook too
	Command  string        // --command: how Claude Code starts the hook
	Events   []string      // --events: PreToolUse, PermissionRequest, PostToolUse, PostToolUseFailure
	// HTTP, with --http, is the server's hook URL: Claude Code posts the
	// event to the server instead of starting a process.
	HTTP string
}

// Install is `countersign hook claude install`: print the hooks block for
// settings.json, or merge it into the given file.
func Install(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	o, err := parseInstall(args, stderr, getenv)
	if err != nil {
		return err
	}
	if o.Settings == "" {
		return printHooks(stdout, o)
	}
	changed, err := MergeSettings(o.Settings, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "countersign hook: %s %s (%s)\n", changed, o.Settings, strings.Join(o.Events, ", "))
	return nil
}

// printHooks prints the hooks block of the options.
func printHooks(stdout io.Writer, o InstallOptions) error {
	hooks := &object{vals: map[string]json.RawMessage{}}
	for _, ev := range o.Events {
		hooks.set(ev, []groupJSON{group(o, ev)})
	}
	root := &object{vals: map[string]json.RawMessage{}}
	root.setObject("hooks", hooks)
	out, err := root.indent()
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}

// timeoutFlag adds --timeout, in seconds or as a duration, to fs; usage
// says what the agent does with it (default: the hook's timeout).
func timeoutFlag(fs *flag.FlagSet, d *time.Duration, usage ...string) {
	text := "the hook's timeout in seconds (default 600)"
	if len(usage) > 0 {
		text = usage[0]
	}
	fs.Func("timeout", text, func(v string) error {
		t, err := parseTimeout(v)
		*d = t
		return err
	})
}

// wholeSeconds refuses a timeout the agent's file, which takes seconds,
// cannot hold.
func wholeSeconds(d time.Duration, file string) error {
	if d%time.Second != 0 {
		return fmt.Errorf("--timeout: %s takes whole seconds", file)
	}
	return nil
}

// hookEvents are the events the hook answers; defaultEvents those it is
// installed for unless --events says otherwise: before each call, and
// after it ran (whether it succeeded or failed), so that what ran under an
// approval is compared with it.
var (
	hookEvents    = []string{EventPreToolUse, EventPermissionRequest, EventPostToolUse, EventPostToolUseFailure}
	defaultEvents = []string{EventPreToolUse, EventPostToolUse, EventPostToolUseFailure}
)

// parseInstall reads install's flags.
func parseInstall(args []string, stderr io.Writer, getenv func(string) string) (InstallOptions, error) {
	o := InstallOptions{Timeout: DefaultTimeout, Command: defaultCommand("claude")}
	fs := flag.NewFlagSet("countersign hook claude install", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Settings, "settings", "", "merge into this settings.json (kept otherwise as it is) instead of printing")
	timeoutFlag(fs, &o.Timeout)
	fs.StringVar(&o.Command, "command", o.Command, "the command Claude Code runs")
	events := fs.String("events", strings.Join(defaultEvents, ","), "the events to hook, comma-separated: PreToolUse, PermissionRequest, and after a call ran PostToolUse, PostToolUseFailure")
	http := fs.Bool("http", false, "an HTTP hook: Claude Code posts each event to the server (countersign serve --claude-hook ACCOUNT), with the key from its environment's COUNTERSIGN_KEY, and starts no process")
	server := fs.String("server", "", "with --http: the server's URL (default: COUNTERSIGN_URL, or server_url in the configuration file)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *server != "" && !*http {
		return o, errors.New("--server is for --http")
	}
	if *http {
		u, err := hookURL(*server, getenv)
		if err != nil {
			return o, err
		}
		o.HTTP = u
	}
	for _, ev := range strings.Split(*events, ",") {
		ev = strings.TrimSpace(ev)
		if !slices.Contains(hookEvents, ev) {
			return o, fmt.Errorf("--events: %q is not one of %s", ev, strings.Join(hookEvents, ", "))
		}
		o.Events = append(o.Events, ev)
	}
	if err := wholeSeconds(o.Timeout, "settings.json"); err != nil {
		return o, err
	}
	return o, nil
}

// seconds is the timeout as settings.json writes it.
func (o InstallOptions) seconds() int { return int(o.Timeout / time.Second) }

// hookJSON is a hook entry of settings.json: a command hook, or an HTTP
// hook.
type hookJSON struct {
	Type           string            `json:"type"`
	Command        string            `json:"command,omitempty"`
	URL            string            `json:"url,omitempty"`
	Headers        map[string]string `json:"headers,omitempty"`
	AllowedEnvVars []string          `json:"allowedEnvVars,omitempty"`
	Timeout        int               `json:"timeout"`
	// OnFailure "block" makes a hook that fails (cannot start, times out,
	// exits with another status than 0 or 2, or answers what Claude Code
	// cannot read) block the call it guards, as exit status 2 does; left
	// out, Claude Code reports the failure and runs the call.
	OnFailure string `json:"onFailure,omitempty"`
}

// onFailureBlock is the onFailure of the hooks that guard a call.
const onFailureBlock = "block"

// guards reports whether the event's hook guards a call, and so must
// block it when it fails: not those after a call, which block nothing.
func guards(ev string) bool { return ev == EventPreToolUse || ev == EventPermissionRequest }

// groupJSON is a matcher group of settings.json.
type groupJSON struct {
	Matcher string     `json:"matcher"`
	Hooks   []hookJSON `json:"hooks"`
}

// hookEntry is the hook entry of the event ev ("" for any). The command
// passes the timeout on, and so does the URL, so that the hook answers
// before Claude Code gives up on it. The HTTP hook's key comes from Claude
// Code's environment when it posts: settings.json holds the name of the
// variable, never the key. A hook that guards a call blocks it when it
// fails (onFailure): the hook always answers before its timeout, so a
// failure is one it could not help (killed, a server that does not answer
// the HTTP hook), and a call nobody checked does not run.
func hookEntry(o InstallOptions, ev string) hookJSON {
	var h hookJSON
	if o.HTTP != "" {
		h = hookJSON{Type: "http", URL: fmt.Sprintf("%s?timeout=%d", o.HTTP, o.seconds()),
			Headers:        map[string]string{"Authorization": "Bearer $COUNTERSIGN_KEY", ProjectDirHeader: "$PWD", PathHeader: "$PATH"},
			AllowedEnvVars: []string{"COUNTERSIGN_KEY", "PWD", "PATH"}, Timeout: o.seconds()}
	} else {
		h = hookJSON{Type: "command", Command: fmt.Sprintf("%s --timeout %d", o.Command, o.seconds()), Timeout: o.seconds()}
	}
	if (o.Agent == "" || o.Agent == "claude") && guards(ev) {
		// Claude Code's field; Codex reads the same file's shape without it.
		h.OnFailure = onFailureBlock
	}
	return h
}

// ProjectDirHeader carries Claude Code's project directory to the HTTP
// hook: the directory it started in, its PWD (Claude Code sets
// CLAUDE_PROJECT_DIR for command hooks only). Without it, the project is
// the input's cwd.
const ProjectDirHeader = "X-Countersign-Project-Dir"

// PathHeader carries Claude Code's PATH to the HTTP hook, which finds
// the rm wrapper's links on it (WrapperLinks), as the command hook does
// on the PATH it inherits from Claude Code: the server's own PATH may not
// hold the wrapper's directory.
const PathHeader = "X-Countersign-Path"

// HTTPPath is the server's route of the HTTP hook.
const HTTPPath = "/api/v1/hooks/claude"

// hookURL is the HTTP hook's URL on the server at base, or on the
// configured server.
func hookURL(base string, getenv func(string) string) (string, error) {
	if base == "" {
		cfg, err := saferm.LoadConfig(saferm.Invocation{}, saferm.LoadOptions{Getenv: getenv})
		if err != nil {
			return "", err
		}
		base = cfg.ServerURL
	}
	if base == "" {
		return "", errors.New("--http needs the server's URL: --server URL, COUNTERSIGN_URL, or server_url in the configuration file")
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("--http: the server's URL %q is not an http or https URL", base)
	}
	return strings.TrimSuffix(u.String(), "/") + HTTPPath, nil
}

// group is the matcher group holding the hook of the event ev: every
// tool, since the policy has an opinion on reads, MCP tools and the rest
// too.
func group(o InstallOptions, ev string) groupJSON {
	return groupJSON{Matcher: "*", Hooks: []hookJSON{hookEntry(o, ev)}}
}

// MergeSettings merges the hook into a settings.json, creating it when
// missing. Everything already there is kept, in its order; an existing
// countersign hook entry is updated in place instead of added twice. The
// file is replaced atomically. It returns what it did.
func MergeSettings(path string, o InstallOptions) (string, error) {
	data, mode, err := readSettings(path)
	if err != nil {
		return "", err
	}
	root, err := parseObject(data)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	hooks, err := root.child("hooks")
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	did := "installed in"
	for _, ev := range o.Events {
		updated, err := mergeEvent(hooks, ev, o)
		if err != nil {
			return "", fmt.Errorf("%s: hooks.%s: %w", path, ev, err)
		}
		if updated {
			did = "updated in"
		}
	}
	root.setObject("hooks", hooks)
	out, err := root.indent()
	if err != nil {
		return "", err
	}
	return did, writeAtomic(path, out, mode)
}

// readSettings reads the file, or "{}" when it does not exist.
func readSettings(path string) ([]byte, fs.FileMode, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return []byte("{}"), 0o600, nil
	}
	if err != nil {
		return nil, 0, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, 0, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte("{}")
	}
	return data, fi.Mode().Perm(), nil
}

// mergeEvent adds the hook to one event's list of matcher groups, or
// updates the countersign entry already there.
func mergeEvent(hooks *object, ev string, o InstallOptions) (updated bool, err error) {
	ours := func(entry *object) bool { return isCountersign(entry, o.Agent) }
	return mergeEntry(hooks, ev, ours, func(entry *object) json.RawMessage {
		if want := hookEntry(o, ev); want.Type == "command" && entryType(entry) == "command" {
			entry.set("command", want.Command)
			entry.set("timeout", o.seconds())
			if want.OnFailure != "" {
				entry.set("onFailure", want.OnFailure)
			}
			return entry.marshal()
		}
		// Another kind of hook, or the HTTP hook, whose URL, headers and
		// variables go together: replaced whole.
		return mustJSON(hookEntry(o, ev))
	}, mustJSON(group(o, ev)))
}

// mergeEntry updates, among one event's matcher groups, the first hook
// entry that ours recognises, to what update makes of it; without one, it
// adds group. The hooks of others stay as they are, in their order.
func mergeEntry(hooks *object, ev string, ours func(*object) bool, update func(*object) json.RawMessage, group json.RawMessage) (updated bool, err error) {
	var groups []json.RawMessage
	if raw, ok := hooks.get(ev); ok {
		if err := json.Unmarshal(raw, &groups); err != nil {
			return false, errors.New("not a list of matcher groups")
		}
	}
	for gi, g := range groups {
		grp, err := parseObject(g)
		if err != nil {
			continue // not ours to judge
		}
		raw, _ := grp.get("hooks")
		var entries []json.RawMessage
		if json.Unmarshal(raw, &entries) != nil {
			continue
		}
		for ei, e := range entries {
			entry, err := parseObject(e)
			if err != nil || !ours(entry) {
				continue
			}
			entries[ei] = update(entry)
			grp.set("hooks", entries)
			groups[gi] = grp.marshal()
			hooks.set(ev, groups)
			return true, nil
		}
	}
	hooks.set(ev, append(groups, group))
	return false, nil
}

// entryType is a hook entry's type.
func entryType(entry *object) string {
	raw, _ := entry.get("type")
	var t string
	json.Unmarshal(raw, &t)
	return t
}

// isCountersign reports whether a hook entry runs `countersign hook
// AGENT` for the agent ("" is claude), whatever the path of the binary,
// or posts to a countersign server's HTTP hook.
func isCountersign(entry *object, agent string) bool {
	if entryType(entry) == "http" {
		raw, _ := entry.get("url")
		var s string
		json.Unmarshal(raw, &s)
		u, err := url.Parse(s)
		return err == nil && u.Path == HTTPPath
	}
	raw, _ := entry.get("command")
	var cmd string
	if json.Unmarshal(raw, &cmd) != nil {
		return false
	}
	f := strings.Fields(cmd)
	if agent == "" {
		agent = "claude"
	}
	if len(f) < 3 || f[1] != "hook" || f[2] != agent {
		return false
	}
	base := filepath.Base(f[0])
	return base == "countersign" || base == "countersign-agent"
}

// defaultCommand is how the agent starts the hook `hook AGENT` unless
// --command says otherwise: the small countersign-agent binary where it is
// installed beside the running one (it starts several times faster, and
// the hook runs on every tool call), else countersign itself from PATH.
func defaultCommand(agent string) string {
	self, err := os.Executable()
	if err != nil {
		return "countersign hook " + agent
	}
	lean := filepath.Join(filepath.Dir(self), "countersign-agent")
	if st, err := os.Stat(lean); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 && shellWord(lean) {
		return lean + " hook " + agent
	}
	return "countersign hook " + agent
}

// shellWord reports whether s stands as one word in a shell command as it
// is, with nothing to quote.
func shellWord(s string) bool {
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("/._+-", r):
		default:
			return false
		}
	}
	return s != ""
}

// writeAtomic replaces path with data: a temporary file in the same
// directory, synced, then renamed over it.
func writeAtomic(path string, data []byte, mode fs.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".settings-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename, there is nothing left to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// object is a JSON object that keeps its keys in order and its values as
// written, so that merging touches only what it changes.
type object struct {
	keys []string
	vals map[string]json.RawMessage
}

// parseObject reads a JSON object.
func parseObject(data []byte) (*object, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	o := &object{vals: map[string]json.RawMessage{}}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		o.set(t.(string), v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	return o, nil
}

// get returns a value.
func (o *object) get(k string) (json.RawMessage, bool) {
	v, ok := o.vals[k]
	return v, ok
}

// set sets a value, keeping the key's place or adding it at the end.
func (o *object) set(k string, v any) {
	raw, ok := v.(json.RawMessage)
	if !ok {
		raw = mustJSON(v)
	}
	if _, had := o.vals[k]; !had {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = raw
}

// child returns the object under k, new when missing.
func (o *object) child(k string) (*object, error) {
	raw, ok := o.get(k)
	if !ok {
		return &object{vals: map[string]json.RawMessage{}}, nil
	}
	c, err := parseObject(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k, err)
	}
	return c, nil
}

// setObject sets k to an object.
func (o *object) setObject(k string, c *object) { o.set(k, c.marshal()) }

// marshal returns the object as compact JSON.
func (o *object) marshal() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(o.vals[k])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// indent returns the object as the file's text: two-space indentation.
func (o *object) indent() ([]byte, error) {
	var compact, out bytes.Buffer
	if err := json.Compact(&compact, o.marshal()); err != nil {
		return nil, err
	}
	if err := json.Indent(&out, compact.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// mustJSON marshals a value built here.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
