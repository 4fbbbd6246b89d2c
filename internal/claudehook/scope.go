package claudehook

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"

	"github.com/countersign/countersign/client/api"
	"github.com/countersign/countersign/internal/bashscope"
	"github.com/countersign/countersign/internal/saferm"
)

// Bounds of the scope the hook sends, the server's: a call with more to
// name sends none, and no window covers it.
const (
	maxScopeCommands = 50
	maxScopePaths    = 200
)

// scopeOf is the shape of a call as the server keeps it with the request:
// for Bash, the program and subcommand of every command the hook judged
// in the line and every target its deletes resolve to, with what they
// hold; for the file tools, the file. An auto-approve window opened on
// the request lets through only calls of the same shape, and the rm
// wrapper's own request for a delete is covered only when it names
// exactly these targets. nil when the shape cannot be told (a call no
// window should cover).
func scopeOf(c *Call, parts []part) *api.Scope {
	switch {
	case slices.Contains(writeTools, c.Tool) && filepath.IsAbs(c.Path):
		return &api.Scope{Paths: []string{filepath.Clean(c.Path)}}
	case c.Tool != "Bash":
		return nil
	}
	sc := &api.Scope{}
	for _, p := range parts {
		if cmd, ok := partCommand(p); ok {
			if cmd == "" {
				return nil
			}
			sc.Commands = append(sc.Commands, cmd)
		}
		if d := p.deleted; d != nil {
			sc.Paths = append(sc.Paths, d.Targets...)
			sc.Files += int64(d.FileCount)
			sc.Bytes += d.Bytes
			sc.FilesCapped = sc.FilesCapped || d.FileCountCapped
		}
	}
	slices.Sort(sc.Commands)
	slices.Sort(sc.Paths)
	sc.Commands, sc.Paths = slices.Compact(sc.Commands), slices.Compact(sc.Paths)
	if len(sc.Commands) == 0 || len(sc.Commands) > maxScopeCommands || len(sc.Paths) > maxScopePaths {
		return nil
	}
	for _, t := range sc.Paths {
		if !filepath.IsAbs(t) || filepath.Clean(t) != t {
			return nil
		}
	}
	return sc
}

// partCommand names the command a part judged: the first word of its own
// command line (the last of its subjects; the ones before are the
// commands wrapping it) and, for programs of subcommands, the
// subcommand. ok is false for a part that is no command (a redirection's
// write).
func partCommand(p part) (cmd string, ok bool) {
	if len(p.subjects) == 0 {
		return "", false
	}
	s := p.subjects[len(p.subjects)-1]
	if s.kind != argCommand {
		return "", false
	}
	return commandOf(s.arg), true
}

// subcommanded are programs whose first operand says what they do: the
// window of "git status" is not one of "git push".
var subcommanded = map[string]bool{
	"git": true, "npm": true, "pnpm": true, "yarn": true, "bun": true, "deno": true, "cargo": true, "go": true,
	"pip": true, "pip3": true, "uv": true, "poetry": true, "docker": true, "podman": true, "kubectl": true,
	"helm": true, "terraform": true, "gh": true, "apt": true, "apt-get": true, "dnf": true, "yum": true,
	"brew": true, "systemctl": true, "make": true, "gcloud": true, "aws": true, "az": true,
}

// gitPlaceOptions are git's global options that say only which
// repository it works in, with the next word or after "=": they are left
// out of a command's name. Every other option before the subcommand (-c,
// --config-env, --exec-path, ...) can change what git runs, and stays in.
var gitPlaceOptions = []string{"-C", "--git-dir", "--work-tree", "--namespace"}

// commandOf names the command of a line: its program as the line names it
// (a path is kept: ./git is not the git on PATH), and for the programs of
// subcommands the first operand after their options. Options before the
// subcommand are part of the name, each with the word after it (which
// may be its value or the subcommand: which, only the program knows), so
// that "kubectl -n prod get" and "kubectl -n prod delete" are two
// commands; only git's place options are left out.
func commandOf(line string) string {
	f := strings.Fields(line)
	if len(f) == 0 {
		return ""
	}
	prog := f[0]
	if !subcommanded[filepath.Base(prog)] {
		return prog
	}
	git := filepath.Base(prog) == "git"
	name := []string{prog}
	for i := 1; i < len(f); i++ {
		v := f[i]
		opt, _, _ := strings.Cut(v, "=")
		switch {
		case git && slices.Contains(gitPlaceOptions, v):
			i++
		case git && opt != v && slices.Contains(gitPlaceOptions, opt):
		case strings.HasPrefix(v, "-") || strings.HasPrefix(v, "+"):
			name = append(name, v)
			if opt == v && i+1 < len(f) {
				i++
				name = append(name, f[i])
			}
		default:
			return strings.Join(append(name, v), " ")
		}
	}
	return strings.Join(name, " ")
}

// coverInput is the tool input that runs an approved Bash call whose rm
// deletes the approval covers: the command, after a line that tells the
// rm wrapper which approval and which session (of which agent, other than
// Claude Code) it runs under, so that the
// wrapper's own request for the same delete is granted at once instead of
// asked twice. Nothing else of the input changes; nil when there is
// nothing to tell.
func coverInput(agent string, in *Input, call *Call, sc *api.Scope, id string) json.RawMessage {
	if call.Tool != "Bash" || sc == nil || len(sc.Paths) == 0 || !slices.Contains(sc.Commands, "rm") ||
		in.SessionID == "" || !saferm.IsRequestID(id) {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(in.ToolInput, &fields) != nil {
		return nil
	}
	line := bashscope.CoverLine(id, in.SessionID, agent) + call.Command
	cmd, err := json.Marshal(line)
	if err != nil {
		return nil
	}
	fields["command"] = cmd
	out, err := json.Marshal(fields)
	if err != nil {
		return nil
	}
	return out
}
