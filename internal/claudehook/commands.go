package claudehook

import (
	"path/filepath"
	"slices"
	"strings"
)

// cmdCtx is one simple command being judged, with where it sits.
type cmdCtx struct {
	w         []word
	st        *shState
	in        stdin
	outer     []subject // the rule subjects of the commands wrapping it (sudo …)
	fromStdin string    // why more arguments come from standard input (xargs), or ""
}

// subjects are the rule subjects of the command: its own line and the
// lines of the commands around it, so that a rule on "sudo *" still sees
// "sudo rm x" when rm is judged.
func (c *cmdCtx) subjects() []subject {
	return append(slices.Clip(c.outer), bashSubject(joinWords(c.w)))
}

// part returns a part of this command with a default.
func (c *cmdCtx) part(def Action, why ...string) part {
	return part{subjects: c.subjects(), def: def, defWhy: why}
}

// inner returns the context of the command that c runs.
func (c *cmdCtx) inner(w []word) *cmdCtx {
	return &cmdCtx{w: w, st: c.st, in: c.in, outer: c.subjects(), fromStdin: c.fromStdin}
}

// Command families.
var (
	shells       = []string{"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish"}
	interpreters = []string{"python", "python2", "python3", "perl", "ruby", "node", "php", "lua"}
	downloaders  = []string{"curl", "wget", "fetch", "aria2c", "http", "https", "xh"}
)

// simple judges one simple command.
func (a *analyzer) simple(c *cmdCtx) {
	if len(c.w) == 0 {
		return
	}
	if !a.spend(false) {
		return
	}
	if !c.w[0].static {
		a.ask(c.subjects(), "the command to run is computed only when it runs: "+c.w[0].src)
		return
	}
	name := c.w[0].val
	if strings.Contains(name, "/") {
		name = filepath.Base(name) // /bin/rm, ./rm
	}
	switch {
	case name == "rm":
		a.rm(c, c.w[1:])
	case name == "unlink":
		a.rm(c, append([]word{lit("--")}, c.w[1:]...))
	case name == "find":
		a.find(c)
	case name == "xargs":
		a.xargs(c)
	case name == "git":
		a.git(c)
	case name == "apply_patch" && a.call.Patches:
		a.applyPatch(c)
	case slices.Contains(shells, name):
		a.shell(c)
	case name == "eval":
		a.eval(c)
	case name == "source" || name == ".":
		a.source(c)
	case name == "trap":
		a.trap(c)
	case name == "cd" || name == "pushd" || name == "popd":
		a.cd(c, name)
	case name == "tee":
		a.tee(c)
	case name == "ln":
		a.ln(c)
	case name == "busybox" && len(c.w) > 1:
		a.add(c.part(Allow, "runs the applet that follows"))
		a.simple(c.inner(c.w[1:]))
	case name == "ssh":
		a.ssh(c)
	case name == "su":
		a.su(c)
	case name == "watch":
		a.watch(c)
	case name == "command" && len(c.w) > 1 && c.w[1].static && (c.w[1].val == "-v" || c.w[1].val == "-V"):
		a.add(c.part(Allow, "looks a command up"))
	default:
		a.other(c, name)
	}
}

// other judges a command without special handling: wrappers, read-only
// commands, and the rest, which is left to Claude Code.
func (a *analyzer) other(c *cmdCtx, name string) {
	if check, ok := stateSetters[name]; ok && (check == nil || check(c.w[1:])) {
		a.prompt(name + " sets variables or the shell's state, which the commands after it use")
	}
	if spec, ok := wrappers[name]; ok {
		a.wrapper(c, name, spec)
		return
	}
	if check, ok := readOnly[name]; ok && (check == nil || check(c.w[1:])) {
		a.add(c.part(Allow, "reads only"))
		return
	}
	if slices.Contains(downloaders, name) {
		a.downloads++
	}
	if slices.Contains(interpreters, name) && c.in.pipe && c.in.downloaded && readsCode(c.w[1:]) {
		a.ask(c.subjects(), "runs code downloaded from the network ("+name+" reads it from the pipe)")
		return
	}
	if a.call.Typed && slices.Contains(interpreters, name) && c.in == (stdin{}) && readsCode(c.w[1:]) {
		a.ask(c.subjects(), "starts "+name+" reading code the agent can type into it later, which the hook never sees")
		return
	}
	if a.destroys(c, name) {
		return
	}
	a.add(c.part(Prompt, "left to Claude Code's permissions"))
}

// readsCode reports whether an interpreter with these arguments reads its
// program from standard input: no script file and no -c/-e program.
func readsCode(args []word) bool {
	for _, w := range args {
		switch v := w.text(); {
		case v == "-":
			return true
		case slices.Contains([]string{"-c", "-e", "-E", "-m", "-r", "-p"}, v):
			return false
		case !strings.HasPrefix(v, "-"):
			return false
		}
	}
	return true
}

// readOnly are commands that only read, each with a check of its
// arguments where an option would make it write (nil: none).
var readOnly = map[string]func([]word) bool{
	"ls": nil, "cat": nil, "head": nil, "tail": nil, "wc": nil, "grep": nil, "egrep": nil,
	"fgrep": nil, "rg": nil, "ag": nil, "pwd": nil, "echo": nil, "printf": nil, "which": nil,
	"type": nil, "whereis": nil, "file": nil, "stat": nil, "du": nil, "df": nil,
	"tree": noOption("-o"), "date": noOption("-s", "--set"), "whoami": nil, "id": nil,
	"uname": nil, "true": nil, "false": nil, ":": nil, "test": nil, "[": nil, "basename": nil,
	"dirname": nil, "realpath": nil, "readlink": nil, "sort": noOption("-o", "--output"),
	"uniq": atMostOperands(1), "cut": nil, "tr": nil, "diff": nil, "cmp": nil, "comm": nil,
	"jq": nil, "column": nil, "nl": nil, "od": nil, "hexdump": nil, "md5sum": nil,
	"sha1sum": nil, "sha256sum": nil, "sha512sum": nil, "seq": nil, "sleep": nil,
	"printenv": nil, "nproc": nil, "uptime": nil, "ps": nil, "groups": nil, "expr": nil,
	"exit": nil, "return": nil, "set": nil, "shift": nil, "break": nil, "continue": nil,
	"less": nil, "more": nil,
}

// stateSetters are built-ins that set variables or the shell's lookup of
// commands (read PATH, printf -v PATH, hash -p, unset 'a[$(…)]'), or test a
// variable by a name that may hold a subscript (test -v): what runs after
// them is not what the rules see.
var stateSetters = map[string]func([]word) bool{
	"read": nil, "mapfile": nil, "readarray": nil, "getopts": nil, "unset": nil, "hash": nil,
	"wait": hasOption("-p"), "printf": hasOption("-v"), "test": hasOption("-v", "-R"), "[": hasOption("-v", "-R"),
	"alias": nil, "enable": nil, "shopt": nil,
}

// hasOption returns a check that reports any of the options, the negation
// of noOption's.
func hasOption(opts ...string) func([]word) bool {
	no := noOption(opts...)
	return func(args []word) bool { return !no(args) }
}

// noOption returns a check that refuses any of the options: a short one
// also inside a cluster (-uo), a long one also as --name=value.
func noOption(opts ...string) func([]word) bool {
	return func(args []word) bool {
		for _, w := range args {
			v := w.text()
			for _, o := range opts {
				long := strings.HasPrefix(o, "--")
				switch {
				case long && (v == o || strings.HasPrefix(v, o+"=")):
					return false
				case !long && len(v) > 1 && v[0] == '-' && v[1] != '-' && strings.Contains(v[1:], o[1:]):
					return false
				}
			}
		}
		return true
	}
}

// atMostOperands returns a check that refuses more than n operands (uniq
// writes its second operand).
func atMostOperands(n int) func([]word) bool {
	return func(args []word) bool {
		count := 0
		for _, w := range args {
			if v := w.text(); v == "-" || !strings.HasPrefix(v, "-") {
				count++
			}
		}
		return count <= n
	}
}

// cd follows a change of directory, so that later relative paths resolve
// where the shell will be. A directory that does not exist, "-", or a
// computed one leaves the working directory unknown: the cd may fail, and
// a following rm then runs somewhere else.
func (a *analyzer) cd(c *cmdCtx, name string) {
	a.add(c.part(Allow, "changes the working directory"))
	args := c.w[1:]
	for len(args) > 0 && args[0].static && len(args[0].val) > 1 && args[0].val[0] == '-' {
		args = args[1:] // -L, -P, -e, --
	}
	switch {
	case name == "popd" || c.st.remote != "":
		c.st.cwd = ""
	case len(args) == 0 && name == "cd":
		c.st.cwd = a.pol.Config.Home
	case len(args) == 0:
		c.st.cwd = ""
	default:
		c.st.cwd = changeDir(c.st.cwd, args[0])
	}
}

// changeDir returns the directory cd to would reach, or "".
func changeDir(cwd string, to word) string {
	v := to.val
	if !to.static || v == "-" || hasMeta(v) || strings.HasPrefix(v, "+") {
		return ""
	}
	if !filepath.IsAbs(v) {
		if cwd == "" {
			return ""
		}
		v = filepath.Join(cwd, v)
	}
	if !isDir(v) {
		return ""
	}
	return filepath.Clean(v)
}

// tee writes its operands, emptied first unless -a.
func (a *analyzer) tee(c *cmdCtx) {
	a.add(c.part(Allow, "copies its input"))
	appends := hasFlag(c.w[1:], 'a', "--append")
	for _, w := range c.w[1:] {
		if w.static && len(w.val) > 1 && w.val[0] == '-' {
			continue // -a, -i, -p, --append, --output-error=…
		}
		a.write(w, c.st, !appends)
	}
}

// eval runs its arguments, joined, as a script.
func (a *analyzer) eval(c *cmdCtx) {
	a.add(c.part(Allow, "runs the script it is given"))
	var src []string
	for _, w := range c.w[1:] {
		if !w.static || c.fromStdin != "" {
			a.ask(c.subjects(), "eval of a string computed only when it runs")
			return
		}
		src = append(src, w.val)
	}
	sub := *c.st
	a.script(strings.Join(src, " "), &sub, stdin{})
}

// source runs a script file, which the hook does not read.
func (a *analyzer) source(c *cmdCtx) {
	if len(c.w) < 2 || !c.w[1].static || c.fromStdin != "" {
		a.ask(c.subjects(), "runs a script file named only when it runs")
		return
	}
	a.add(c.part(Prompt, "runs the commands of the script file "+c.w[1].val))
}

// trap sets a command to run later; it is judged now.
func (a *analyzer) trap(c *cmdCtx) {
	a.add(c.part(Allow, "sets a signal handler"))
	args := c.w[1:]
	if len(args) > 0 && args[0].static && args[0].val == "--" {
		args = args[1:]
	}
	if len(args) < 2 || (args[0].static && (args[0].val == "-p" || args[0].val == "-l" || args[0].val == "-" || args[0].val == "")) {
		return
	}
	if !args[0].static {
		a.ask(c.subjects(), "a trap whose command is computed only when it runs")
		return
	}
	sub := *c.st
	a.script(args[0].val, &sub, stdin{})
}
