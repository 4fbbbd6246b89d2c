package claudehook

import (
	"slices"
	"strings"
)

// wrapperSpec describes a command that runs another command: its options
// (to skip them), what stands between them and the command, and its own
// verdict.
type wrapperSpec struct {
	argOpts    string   // short options that take a value
	longArgs   []string // long options that take a value as the next word
	positional int      // words before the command (timeout's duration)
	assigns    bool     // NAME=VALUE words before the command (env)
	own        Action   // the wrapper's own verdict: Prompt for another user or place
	remote     string   // where the command runs, when not here
	stops      string   // short options after which no command follows
}

// wrappers are the commands that run the command after their options.
var wrappers = map[string]wrapperSpec{
	"sudo": {argOpts: "CDghpRrTtUu", longArgs: []string{"--chdir", "--close-from", "--group", "--host", "--prompt",
		"--chroot", "--role", "--type", "--command-timeout", "--other-user", "--user"}, own: Prompt, stops: "elvkKV"},
	"doas":     {argOpts: "uC", own: Prompt},
	"env":      {argOpts: "uCS", longArgs: []string{"--unset", "--chdir", "--split-string"}, assigns: true},
	"nice":     {argOpts: "n", longArgs: []string{"--adjustment"}},
	"nohup":    {},
	"timeout":  {argOpts: "sk", longArgs: []string{"--signal", "--kill-after"}, positional: 1},
	"stdbuf":   {argOpts: "ioe", longArgs: []string{"--input", "--output", "--error"}},
	"ionice":   {argOpts: "cnpPu", longArgs: []string{"--class", "--classdata", "--pid", "--pgid", "--uid"}},
	"setsid":   {},
	"time":     {argOpts: "fo", longArgs: []string{"--format", "--output"}},
	"command":  {},
	"builtin":  {},
	"exec":     {argOpts: "a"},
	"chronic":  {},
	"unbuffer": {},
	"taskset":  {positional: 1},
	"chroot":   {longArgs: []string{"--userspec", "--groups"}, positional: 1, own: Prompt, remote: "in another root directory (chroot)"},
}

// option is one option a wrapper was given, with its value.
type option struct{ name, val string }

// splitWrapper separates a wrapper's options from the command it runs. ok
// is false when an option is computed only when it runs.
func splitWrapper(args []word, spec wrapperSpec) (rest []word, opts []option, ok bool) {
	i := 0
	for i < len(args) {
		w := args[i]
		if !w.static {
			break // the command itself is computed: simple() asks
		}
		v := w.val
		if v == "--" {
			i++
			break
		}
		switch {
		case strings.HasPrefix(v, "--"):
			name, val, has := strings.Cut(v, "=")
			i++
			if !has && slices.Contains(spec.longArgs, name) && i < len(args) {
				if !args[i].static {
					return nil, nil, false
				}
				val = args[i].val
				i++
			}
			opts = append(opts, option{name, val})
		case isOption(v):
			var more []option
			if i, more, ok = shortOptions(args, i, spec.argOpts); !ok {
				return nil, nil, false
			}
			opts = append(opts, more...)
		case spec.assigns && strings.Index(v, "=") > 0:
			i++
		default:
			return positional(args[i:], spec.positional), opts, true
		}
	}
	return positional(args[min(i, len(args)):], spec.positional), opts, true
}

// shortOptions reads the cluster of short options at args[i] and returns
// the index of the next word.
func shortOptions(args []word, i int, argOpts string) (int, []option, bool) {
	v := args[i].val
	i++
	var opts []option
	for k := 1; k < len(v); k++ {
		if strings.IndexByte(argOpts, v[k]) < 0 {
			opts = append(opts, option{"-" + v[k:k+1], ""})
			continue
		}
		val := v[k+1:]
		if val == "" && i < len(args) {
			if !args[i].static {
				return i, nil, false
			}
			val = args[i].val
			i++
		}
		return i, append(opts, option{"-" + v[k:k+1], val}), true
	}
	return i, opts, true
}

// positional drops the n words before the command.
func positional(args []word, n int) []word {
	if len(args) < n {
		return nil
	}
	return args[n:]
}

// wrapper judges a wrapper and the command it runs.
func (a *analyzer) wrapper(c *cmdCtx, name string, spec wrapperSpec) {
	rest, opts, ok := splitWrapper(c.w[1:], spec)
	if !ok {
		a.ask(c.subjects(), name+" with options computed only when it runs")
		return
	}
	why := "runs the command that follows"
	if spec.own == Prompt {
		why = "runs the command that follows as another user or elsewhere"
	}
	a.add(c.part(spec.own, why))
	sub := *c.st
	if spec.remote != "" {
		sub.remote, sub.cwd = spec.remote, ""
	}
	for _, o := range opts {
		switch {
		case len(o.name) == 2 && strings.Contains(spec.stops, o.name[1:]):
			return // sudo -e edits files, -l lists: no command runs
		case o.name == "-S" || o.name == "--split-string":
			a.ask(c.subjects(), "env -S splits a string into a command, which the hook does not follow")
			return
		case (o.name == "-C" && name == "env") || (o.name == "-D" && name == "sudo") || o.name == "--chdir":
			sub.cwd = changeDir(sub.cwd, lit(o.val))
		}
	}
	if len(rest) == 0 {
		return
	}
	inner := c.inner(rest)
	inner.st = &sub
	a.simple(inner)
}

// shell judges sh, bash and their kind: a script given with -c, on a
// here-document or here-string, is judged as commands; a script read from
// a pipe cannot be checked (curl … | sh: downloaded code); a script file
// is left to Claude Code.
func (a *analyzer) shell(c *cmdCtx) {
	a.add(c.part(Allow, "runs the script it is given"))
	mode, script, ok := shellArgs(c.w[1:])
	switch {
	case !ok:
		a.ask(c.subjects(), "a shell whose options or script are computed only when it runs")
	case mode == "c" && (!script.static || c.fromStdin != ""):
		a.ask(c.subjects(), "a shell script computed only when it runs: "+script.src)
	case mode == "c":
		sub := *c.st
		a.script(script.val, &sub, stdin{})
	case mode == "file" && !script.static:
		a.ask(c.subjects(), "runs a script file named only when it runs: "+script.src)
	case mode == "file":
		a.add(c.part(Prompt, "runs the script file "+script.val+", which the hook does not read"))
	default:
		a.shellStdin(c)
	}
}

// shellStdin judges a shell that reads its script from standard input.
func (a *analyzer) shellStdin(c *cmdCtx) {
	switch in := c.in; {
	case in.doc != nil:
		body, ok := heredoc(in.doc)
		if !ok {
			a.ask(c.subjects(), "a shell script in a here-document with expansions, computed only when it runs")
			return
		}
		sub := *c.st
		a.script(body, &sub, stdin{})
	case in.pipe && in.downloaded:
		a.ask(c.subjects(), "runs code downloaded from the network (curl … | sh), which cannot be checked")
	case in.pipe:
		a.ask(c.subjects(), "runs a shell script read from a pipe, which cannot be checked")
	case in.file:
		a.add(c.part(Prompt, "runs a shell script read from a file, which the hook does not read"))
	case a.call.Typed:
		a.ask(c.subjects(), "starts a shell the agent can type commands into later, which the hook never sees")
	default:
		a.add(c.part(Prompt, "starts a shell"))
	}
}

// shellArgs reads a shell's arguments: mode "c" with the -c script, "file"
// with the script file, or "stdin".
func shellArgs(args []word) (mode string, script word, ok bool) {
	cflag, sflag := false, false
	i := 0
loop:
	for ; i < len(args); i++ {
		w := args[i]
		if !w.static {
			break // the script, or a script file: both judged below
		}
		switch v := w.val; {
		case v == "-":
			return "stdin", word{}, true
		case v == "--":
			i++
			break loop
		case v == "--rcfile" || v == "--init-file":
			i++
		case strings.HasPrefix(v, "--"):
		case (v[0] == '-' || v[0] == '+') && len(v) > 1:
			cflag = cflag || strings.Contains(v[1:], "c")
			sflag = sflag || strings.Contains(v[1:], "s")
			if strings.ContainsAny(v[1:], "oO") {
				i++ // -o pipefail
			}
		default:
			break loop
		}
	}
	switch {
	case cflag && i < len(args):
		return "c", args[i], true
	case cflag:
		return "", word{}, false
	case sflag || i >= len(args):
		return "stdin", word{}, true
	}
	return "file", args[i], true
}

// ssh judges the remote command: deletes there are asked, since their
// paths cannot be checked here; ssh itself is left to Claude Code.
func (a *analyzer) ssh(c *cmdCtx) {
	a.add(c.part(Prompt, "connects to another host"))
	rest, _, ok := splitWrapper(c.w[1:], wrapperSpec{argOpts: "BbcDEeFIiJLlmOoPpQRSWw", positional: 1})
	if !ok || len(rest) == 0 {
		return
	}
	a.remoteScript(c, rest, "on another host (ssh)")
}

// su judges the command given with -c; su itself is left to Claude Code.
func (a *analyzer) su(c *cmdCtx) {
	a.add(c.part(Prompt, "runs commands as another user"))
	_, opts, ok := splitWrapper(c.w[1:], wrapperSpec{argOpts: "csgGw", longArgs: []string{"--command", "--shell", "--group", "--supp-group"}})
	if !ok {
		a.ask(c.subjects(), "su with options computed only when it runs")
		return
	}
	for _, o := range opts {
		if o.name == "-c" || o.name == "--command" {
			sub := *c.st
			a.script(o.val, &sub, stdin{})
		}
	}
}

// watch runs its arguments, joined, through sh -c, again and again.
func (a *analyzer) watch(c *cmdCtx) {
	a.add(c.part(Allow, "runs the command that follows, repeatedly"))
	rest, opts, ok := splitWrapper(c.w[1:], wrapperSpec{argOpts: "nq", longArgs: []string{"--interval"}})
	if !ok || len(rest) == 0 {
		return
	}
	for _, o := range opts {
		if o.name == "-x" || o.name == "--exec" {
			a.simple(c.inner(rest))
			return
		}
	}
	a.remoteScript(c, rest, "")
}

// remoteScript judges words joined into a script, run where named.
func (a *analyzer) remoteScript(c *cmdCtx, ws []word, where string) {
	sub := *c.st
	if where != "" {
		sub.remote, sub.cwd = where, ""
	}
	a.script(joinWords(ws), &sub, stdin{})
}
