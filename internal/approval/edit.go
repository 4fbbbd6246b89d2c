package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/bashscope"
	"github.com/countersign/countersign/internal/limit"
	"github.com/countersign/countersign/internal/shellword"
	"github.com/countersign/countersign/internal/visible"
	"mvdan.cc/sh/v3/syntax"
)

// maxEditAudit bounds each version of the arguments an audit entry of an
// edited approval holds (as JSON, escapes included), so that both fit
// the entry's detail.
const maxEditAudit = 1500

// Edited returns the request idOrRef as the approver's edit e would make
// it: the edited arguments, their binding and preview, the risk reasons
// of the original plus the server's own assessment of the edited action,
// Protected when either touches a protected path, and the scope of the
// edited action; Original holds the action as the agent asked for it.
// It is saved nowhere: the inbox shows it before the approver approves
// the edit, and a step-up's challenge binds its BindingHash. An edit
// equal to the original returns the request as it is, Original nil.
// Errors: ENOTFOUND, ECONFLICT (not pending), EINVALID (a bad edit),
// EFORBIDDEN (a viewer).
func (s *Service) Edited(ctx context.Context, ap countersign.ApproverPrincipal, idOrRef string, e countersign.Edit) (*countersign.Request, error) {
	r, err := s.Find(ctx, ap, idOrRef)
	if err != nil {
		return nil, err
	}
	if !ap.Role.Decides() {
		return nil, ErrViewer()
	}
	if err := s.checkTeams(ctx); err != nil {
		return nil, err
	}
	edited, _, err := s.editRequest(r, e)
	return edited, err
}

// editRequest checks the edit e of r and returns r as it makes it; same
// is set, with r itself, when the edit changes nothing.
func (s *Service) editRequest(r *countersign.Request, e countersign.Edit) (edited *countersign.Request, same bool, err error) {
	switch {
	case r.Status != countersign.StatusPending:
		return nil, false, countersign.Errorf(countersign.ECONFLICT, "request is already %s; only a pending request can be edited", r.Status)
	case r.Original != nil:
		return nil, false, countersign.Errorf(countersign.ECONFLICT, "request was edited already")
	case r.SeedID != "":
		return nil, false, countersign.Errorf(countersign.EINVALID, "a request of the seed-compatible API cannot be edited: its client runs only what it asked")
	case len(e.Arguments) == 0:
		return nil, false, countersign.Errorf(countersign.EINVALID, "edit.arguments is required")
	}
	args, err := boundedArguments(e.Arguments)
	if err != nil {
		return nil, false, countersign.Errorf(countersign.EINVALID, "edit.%s", strings.TrimPrefix(err.Error(), "EINVALID: "))
	}
	if bytes.Equal(args, r.Arguments) {
		return r, true, nil
	}
	if r.Kind != countersign.KindGeneric && (len(args) == 0 || args[0] != '{') {
		return nil, false, countersign.Errorf(countersign.EINVALID, "edit.arguments must be a JSON object")
	}
	var a assessment
	switch {
	case r.Kind == countersign.KindRm:
		a, err = assessRmEdit(r, args)
	case r.Kind == countersign.KindTool && r.Action == "Bash":
		a, err = assessBashEdit(r, args)
	case r.Kind == countersign.KindTool && strings.HasPrefix(r.Action, "mcp__"):
		// An MCP server's tool through the hook: as an MCP call's edit.
	case r.Kind == countersign.KindTool && knownTools[r.Action]:
		a = assessFileEdit(args)
	case r.Kind == countersign.KindTool:
		// A tool whose input the server does not read (a patch, a
		// PowerShell command, one it does not know) may do anything.
		a = assessFileEdit(args)
		a.reasons = append(a.reasons, "edited call: the server cannot judge what "+r.Action+" does")
		a.protected = true
	}
	if err != nil {
		return nil, false, err
	}
	preview := editedPreview(r, args)
	got := *r
	got.Original = &countersign.Original{Arguments: r.Arguments, ArgsHash: r.ArgsHash, Preview: r.Preview,
		PreviewHash: r.PreviewHash, RiskReasons: slices.Clone(r.RiskReasons)}
	got.Arguments, got.ArgsHash = args, Hash(args)
	got.Preview, got.PreviewHash = preview, Hash([]byte(preview))
	got.ArgumentsText = ArgumentsText(args)
	got.RiskReasons = slices.Clone(r.RiskReasons)
	for _, reason := range a.reasons {
		// Words of the edited action: shown as a human reads them,
		// nothing hidden, bounded as an agent's reasons are.
		reason = limit.Text(visible.String(reason), maxRiskReason)
		if !slices.Contains(got.RiskReasons, reason) {
			got.RiskReasons = append(got.RiskReasons, reason)
		}
	}
	if len(got.RiskReasons) > maxRiskReasons {
		got.RiskReasons = append(got.RiskReasons[:maxRiskReasons-1], "and more risks of the edited action")
	}
	got.Protected = r.Protected || a.protected
	got.Scope = &countersign.Scope{StatedScope: a.stated, Classes: reasonClasses(got.RiskReasons)}
	if r.Kind == countersign.KindRm {
		rmScope(got.Scope, args)
	}
	if err := s.sameRule(r, &got); err != nil {
		return nil, false, err
	}
	return &got, false, nil
}

// sameRule refuses an edit that would put the request under another team
// rule than the one it asked under: the votes of one rule would then be
// counted by another's quorum, routing and separation, and an edit could
// move a request from a two-person rule to a one-person one. An edit only
// adds risk, so the agent can ask again for the edited action, which then
// meets its own rule from the start.
func (s *Service) sameRule(r, edited *countersign.Request) error {
	was, now := s.cfg.Teams.Rule(r), s.cfg.Teams.Rule(edited)
	if was == now {
		return nil
	}
	return countersign.Errorf(countersign.EINVALID, "this edit would put the request under another team rule (%s instead of %s); deny it, and let the agent ask for the edited action",
		ruleWords(now), ruleWords(was))
}

// ruleWords names a team rule by whom it routes to and how many it asks.
func ruleWords(rule *TeamRule) string {
	if rule == nil {
		return "no rule: every approver of the account"
	}
	if !rule.Votes() {
		return "routed to " + rule.Route
	}
	return "routed to " + rule.Route + ", with " + rule.needs()
}

// editedPreview is what the human reads of an edited action: for a
// delete, the targets kept and those left out; for a Bash call, the
// edited command line; else the action and its arguments. The agent's
// own preview is kept in the original.
func editedPreview(r *countersign.Request, args json.RawMessage) string {
	var b strings.Builder
	switch {
	case r.Kind == countersign.KindRm:
		var was, now struct {
			Targets []string `json:"targets"`
		}
		json.Unmarshal(r.Arguments, &was)
		json.Unmarshal(args, &now)
		fmt.Fprintf(&b, "Edited by the approver: delete only %d of the %d targets the agent asked for.\n\nTargets:\n", len(now.Targets), len(was.Targets))
		for _, t := range now.Targets {
			b.WriteString("  " + t + "\n")
		}
		b.WriteString("\nNot deleted:\n")
		for _, t := range was.Targets {
			if !slices.Contains(now.Targets, t) {
				b.WriteString("  " + t + "\n")
			}
		}
	case r.Kind == countersign.KindTool && r.Action == "Bash":
		b.WriteString("Edited by the approver: Bash\n$ " + bashCommand(args) + "\n")
	default:
		return DefaultPreview(r.Action, args)
	}
	return limit.Text(visible.String(b.String()), MaxPreview)
}

// assessment is the server's own judgement of an edited action: what it
// adds to the original's risk reasons, whether it touches a protected
// path, and its shape.
type assessment struct {
	reasons   []string
	protected bool
	stated    countersign.StatedScope
}

// assessRmEdit checks an edit of an rm request: the same fields, the
// targets a non-empty subset of the original's ("only fewer"). A target
// in a protected path says so.
func assessRmEdit(r *countersign.Request, args json.RawMessage) (assessment, error) {
	var was, now map[string]json.RawMessage
	if json.Unmarshal(r.Arguments, &was) != nil || was["targets"] == nil {
		return assessment{}, countersign.Errorf(countersign.EINVALID, "this delete request names no targets that an edit could narrow")
	}
	if json.Unmarshal(args, &now) != nil || len(now) != len(was) {
		return assessment{}, countersign.Errorf(countersign.EINVALID, "an edit of a delete may only remove targets; every other field stays as the agent sent it")
	}
	for k, v := range was {
		if k != "targets" && !bytes.Equal(now[k], v) {
			return assessment{}, countersign.Errorf(countersign.EINVALID, "an edit of a delete may only remove targets; %s stays as the agent sent it", k)
		}
	}
	var before, after []string
	if json.Unmarshal(was["targets"], &before) != nil || json.Unmarshal(now["targets"], &after) != nil {
		return assessment{}, countersign.Errorf(countersign.EINVALID, "edit.arguments.targets must be a list of the request's targets")
	}
	if len(after) == 0 {
		return assessment{}, countersign.Errorf(countersign.EINVALID, "an edit of a delete keeps at least one target; deny the request to delete nothing")
	}
	seen := map[string]bool{}
	var a assessment
	for _, t := range after {
		if !slices.Contains(before, t) || seen[t] {
			return assessment{}, countersign.Errorf(countersign.EINVALID, "an edit of a delete may only remove targets, each once: %q is not one of the request's", limit.Text(t, 200))
		}
		seen[t] = true
		if protectedPath(t) {
			a.reasons, a.protected = append(a.reasons, "protected path: "+t), true
		}
	}
	return a, nil
}

// destroyers are the commands an edited Bash line is flagged for: they
// lose data without a trace, or run other commands the server cannot
// read. The value is the risk reason's words.
var destroyers = map[string]string{
	"rm": "deletes files", "rmdir": "deletes directories", "unlink": "deletes files", "shred": "overwrites and deletes files",
	"find": "can delete files (find)", "dd": "overwrites data (dd)", "truncate": "truncates files", "mkfs": "formats a file system",
	"wipefs": "wipes a file system", "mv": "moves files, over existing ones", "chmod": "changes permissions", "chown": "changes owners",
	"git": "changes the git repository", "rsync": "can delete files (rsync)", "kill": "stops processes", "pkill": "stops processes",
	"killall": "stops processes", "curl": "reaches the network", "wget": "reaches the network", "scp": "copies over the network",
	"ssh": "runs commands on another host", "sudo": "runs a command as another user", "doas": "runs a command as another user",
	"su": "runs a command as another user", "xargs": "runs commands it reads", "eval": "runs a computed command",
	"exec": "replaces the shell", "source": "runs a script", ".": "runs a script", "sh": "runs a shell", "bash": "runs a shell",
	"zsh": "runs a shell", "dash": "runs a shell", "python": "runs code", "python3": "runs code", "perl": "runs code",
	"ruby": "runs code", "node": "runs code", "env": "runs a command", "nohup": "runs a command", "timeout": "runs a command",
	"crontab": "changes scheduled jobs", "systemctl": "changes services", "docker": "runs containers", "kubectl": "changes a cluster",
	"npm": "runs package scripts", "pip": "installs packages", "apt": "installs packages", "apt-get": "installs packages",
}

// deleters are the commands that delete files: one the walk of the
// line's deletes (bashscope.Deletes) cannot follow, inside a command or
// process substitution or a coprocess, makes the line protected.
var deleters = map[string]bool{"rm": true, "rmdir": true, "unlink": true, "shred": true, "find": true}

// commandName is the literal name of the command a call runs (its base
// name, \rm and "rm" read as rm); ok is false when it is computed only
// when the line runs, or made by a brace expansion.
func commandName(w *syntax.Word) (string, bool) {
	cp := *w // SplitBraces replaces the parts
	if syntax.SplitBraces(&cp) {
		return "", false
	}
	name, ok := shellword.Literal(w, "")
	if !ok || name == "" {
		return "", false
	}
	base := path.Base(name)
	if strings.HasPrefix(base, "mkfs") {
		base = "mkfs"
	}
	return base, true
}

// hidesDelete reports whether n, a substitution or a coprocess, runs a
// command that deletes, runs others, or is computed: the walk of the
// line's deletes does not look inside it.
func hidesDelete(n syntax.Node) bool {
	hides := false
	syntax.Walk(n, func(n syntax.Node) bool {
		if c, ok := n.(*syntax.CallExpr); ok && len(c.Args) > 0 {
			name, ok := commandName(c.Args[0])
			hides = hides || !ok || deleters[name] || bashscope.Runner(name)
		}
		return !hides
	})
	return hides
}

// runsCommand reports whether the arguments of find hold an action that
// runs a command (-exec, -execdir, -ok, -okdir).
func runsCommand(args []*syntax.Word) bool {
	for _, w := range args[1:] {
		if v, ok := shellword.Literal(w, ""); !ok || v == "-exec" || v == "-execdir" || v == "-ok" || v == "-okdir" {
			return true
		}
	}
	return false
}

// assessBashEdit judges an edited Bash command from its words alone (the
// server cannot look at the agent's files): each command of a destroying
// class adds a reason, and a delete of a protected path, or one the
// server cannot follow, or a command that runs others, makes the request
// protected. A line that does not parse is refused.
func assessBashEdit(r *countersign.Request, args json.RawMessage) (assessment, error) {
	var in map[string]json.RawMessage
	var line string
	if json.Unmarshal(args, &in) != nil || json.Unmarshal(in["command"], &line) != nil || strings.TrimSpace(line) == "" {
		return assessment{}, countersign.Errorf(countersign.EINVALID, "edit.arguments.command must be the command line to run")
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(line), "")
	if err != nil {
		return assessment{}, countersign.Errorf(countersign.EINVALID, "the edited command does not parse as Bash")
	}
	var a assessment
	add := func(reason string) {
		if !slices.Contains(a.reasons, reason) {
			a.reasons = append(a.reasons, reason)
		}
	}
	var commands []string
	var judged uint // the end of the last substitution judged whole
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CallExpr:
			if len(n.Args) == 0 {
				return true
			}
			base, ok := commandName(n.Args[0])
			if !ok {
				add("edited command: runs a computed command")
				a.protected = true
				return true
			}
			commands = append(commands, base)
			if why, ok := destroyers[base]; ok {
				add("edited command: " + base + " " + why)
			}
			switch {
			case bashscope.Runner(base):
				// What it runs is not followed: a delete behind it
				// could be of anything.
				if _, ok := destroyers[base]; !ok {
					add("edited command: " + base + " runs another command")
				}
				a.protected = true
			case base == "find" && runsCommand(n.Args):
				add("edited command: find runs a command on what it finds")
				a.protected = true
			}
		case *syntax.CmdSubst, *syntax.ProcSubst, *syntax.CoprocClause:
			// Judged whole, once: one inside another was judged with it,
			// so that nesting costs no more than the line's length.
			if n.Pos().Offset() >= judged {
				judged = n.End().Offset()
				if hidesDelete(n) {
					add("edited command: deletes or runs commands where the server does not follow them")
					a.protected = true
				}
			}
		case *syntax.Redirect:
			if writes(n) {
				target := ""
				if n.Word != nil {
					target, _ = shellword.Literal(n.Word, "")
				}
				switch {
				case target == "/dev/null":
				case target == "" || !path.IsAbs(target) && r.Context.Cwd == "":
					add("edited command: writes to a file")
				default:
					if !path.IsAbs(target) {
						target = path.Join(r.Context.Cwd, target)
					}
					add("edited command: writes to a file")
					if protectedPath(path.Clean(target)) {
						add("protected path: " + path.Clean(target))
						a.protected = true
					}
				}
			}
		case *syntax.FuncDecl:
			add("edited command: defines a function")
			a.protected = true
		}
		return true
	})
	paths, patterns, all, ok := bashscope.Deletes(line, r.Context.Cwd)
	if !ok || !all {
		add("edited command: deletes a path the server cannot follow")
		a.protected = true
	}
	for _, p := range append(slices.Clone(paths), patterns...) {
		if protectedPath(globRoot(p)) {
			add("protected path: " + p)
			a.protected = true
		}
	}
	a.stated.Commands = sortedSet(commands)
	if ok && all && len(patterns) == 0 {
		a.stated.Paths = paths
	}
	return a, nil
}

// writes reports whether the redirection n opens a file for writing:
// >, >>, &>, &>>, >|, <> and >& to a word that names no file descriptor.
func writes(n *syntax.Redirect) bool {
	switch n.Op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll, syntax.RdrClob, syntax.RdrInOut:
		return true
	case syntax.DplOut:
		v, ok := "", false
		if n.Word != nil {
			v, ok = shellword.Literal(n.Word, "")
		}
		if !ok {
			return false // >&$fd: a descriptor, as Bash reads it most often
		}
		if v == "-" {
			return false
		}
		for _, c := range v {
			if c < '0' || c > '9' {
				return true
			}
		}
		return v == ""
	}
	return false
}

// knownTools are the coding agents' tools (in Claude Code's words) whose
// edited input the server judges by the file it names, if any: their
// effect is that file's, or none on files. An MCP server's tool through
// the hook (mcp__…) is judged as an MCP call is: any arguments, the same
// tool. Any other tool's edit is one the server cannot judge.
var knownTools = map[string]bool{
	"Write": true, "Edit": true, "MultiEdit": true, "NotebookEdit": true, "Read": true, "NotebookRead": true,
	"Glob": true, "Grep": true, "LS": true, "WebFetch": true, "WebSearch": true, "TodoRead": true, "TodoWrite": true,
}

// assessFileEdit judges an edited call of a file tool: a file in a
// protected path says so.
func assessFileEdit(args json.RawMessage) assessment {
	var in map[string]json.RawMessage
	json.Unmarshal(args, &in)
	var a assessment
	for _, k := range []string{"file_path", "path", "notebook_path"} {
		var p string
		if json.Unmarshal(in[k], &p) != nil || p == "" {
			continue
		}
		if !path.IsAbs(p) || path.Clean(p) != p {
			a.reasons = append(a.reasons, "edited call: a file path the server cannot resolve")
			a.protected = true
			continue
		}
		a.stated.Paths = append(a.stated.Paths, p)
		if protectedPath(p) {
			a.reasons, a.protected = append(a.reasons, "protected path: "+p), true
		}
	}
	a.stated.Paths = sortedSet(a.stated.Paths)
	return a
}

// globRoot is the directory a glob pattern's matches all lie in: the
// pattern up to its first metacharacter's path element.
func globRoot(p string) string {
	i := strings.IndexAny(p, "*?[")
	if i < 0 {
		return p
	}
	return path.Dir(p[:i] + "x")
}

// systemProtected are the trees every host keeps protected, as the rm
// wrapper's defaults, and the homes themselves; homeProtected the
// directories of credentials and configuration within any home.
var (
	systemProtected = append(countersign.SystemProtected[:], "/home", "/Users")
	homeProtected   = countersign.HomeProtected[:]
)

// protectedPath reports whether the absolute, clean path p is a protected
// path, lies in one, or contains one (/ and /var contain some); a path
// with ~ or not absolute cannot be judged and counts as protected. Letters
// are compared in any case: on the case-insensitive file systems of macOS
// and Windows, /ETC is /etc.
func protectedPath(p string) bool {
	if !path.IsAbs(p) || strings.Contains(p, "~") {
		return true
	}
	p = strings.ToLower(path.Clean(p))
	for _, root := range systemProtected {
		root = strings.ToLower(root)
		if root == "/home" || root == "/users" {
			// A home's own files are not protected, only the homes
			// themselves and their credentials.
			if p == "/" || p == root || path.Dir(p) == root {
				return true
			}
			continue
		}
		if p == root || strings.HasPrefix(p, root+"/") || strings.HasPrefix(root, p+"/") || p == "/" {
			return true
		}
	}
	for _, part := range strings.Split(p, "/") {
		if slices.Contains(homeProtected, part) {
			return true
		}
	}
	return false
}

// auditText is s cut so that it takes at most max bytes as a JSON string
// of an audit detail, escapes included.
func auditText(s string, max int) string {
	t := limit.Text(s, max)
	for n := max; n > 64; n = n * 2 / 3 {
		if b, _ := json.Marshal(t); len(b) <= max {
			return t
		}
		t = limit.Text(s, n*2/3)
	}
	return t
}

// editDetail adds to an approval's audit detail both versions of an
// edited action: hashes, and the arguments, each bounded.
func editDetail(detail map[string]any, e *countersign.Request) {
	o := e.Original
	detail["edited"] = true
	detail["original_args_hash"], detail["original_preview_hash"] = o.ArgsHash, o.PreviewHash
	detail["args_hash"], detail["preview_hash"] = e.ArgsHash, e.PreviewHash
	detail["original_arguments"] = auditText(string(o.Arguments), maxEditAudit)
	detail["arguments"] = auditText(string(e.Arguments), maxEditAudit)
	if added := len(e.RiskReasons) - len(o.RiskReasons); added > 0 {
		detail["added_risk_reasons"] = added
	}
}
