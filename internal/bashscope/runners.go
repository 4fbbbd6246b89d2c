package bashscope

// runners are the commands that run another command, or code, that a
// walk of the line's words does not follow: the Claude Code hook's
// wrappers, shells and interpreters, and the other commands that run
// what they are given (a program's text, a command after their options,
// one read from their input). A delete behind one names nothing here.
var runners = map[string]bool{
	// The hook's wrappers (claudehook: wrappers, busybox, watch, ssh, su,
	// xargs, eval, source, trap).
	"sudo": true, "doas": true, "env": true, "nice": true, "nohup": true, "timeout": true, "stdbuf": true,
	"ionice": true, "setsid": true, "time": true, "command": true, "builtin": true, "exec": true,
	"chronic": true, "unbuffer": true, "taskset": true, "chroot": true, "busybox": true, "watch": true,
	"ssh": true, "su": true, "xargs": true, "eval": true, "source": true, ".": true, "trap": true,
	// The hook's shells and interpreters.
	"sh": true, "bash": true, "zsh": true, "dash": true, "ksh": true, "mksh": true, "ash": true, "fish": true,
	"python": true, "python2": true, "python3": true, "perl": true, "ruby": true, "node": true, "php": true, "lua": true,
	// Others that run what they are given.
	"csh": true, "tcsh": true, "toybox": true, "awk": true, "gawk": true, "mawk": true, "nawk": true,
	"tclsh": true, "expect": true, "deno": true, "bun": true, "parallel": true, "flock": true, "strace": true,
	"ltrace": true, "gdb": true, "script": true, "fakeroot": true, "runuser": true, "pkexec": true,
	"nsenter": true, "unshare": true, "systemd-run": true, "firejail": true, "coproc": true,
	// Builtins that make a later command name run other code: an alias,
	// a builtin loaded from a file, a name bound to another program.
	"alias": true, "enable": true, "hash": true,
}

// Runner reports whether the command name (a path's base name) runs
// another command or code that a walk of the line does not follow, so
// that what the line deletes cannot be told from its words.
func Runner(name string) bool { return runners[name] }
