package approval

import (
	"encoding/json"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/countersign/countersign"
)

// Limits of a scope, so that it stays readable on the decision page and
// cheap to compare. A hook with more to name sends no scope: its request
// is then never covered by a window, and a window on it covers nothing.
const (
	maxScopeCommands = 50
	maxScopeCommand  = 200
	maxScopePaths    = 200
	maxScopePath     = 4096
)

// scopeOf checks the scope the agent stated for a new request and returns
// the scope the server keeps: for rm requests, the targets of the
// arguments the human reads; for Bash calls, the commands and delete paths
// the hook judged, each command found in the command line; for file tools,
// the paths; for every kind, the classes of the risk reasons. What the
// agent states can only narrow what a window on the request covers, never
// widen it past what the decision page shows.
func scopeOf(kind countersign.Kind, action string, args json.RawMessage, reasons []string, in *countersign.Scope) (*countersign.Scope, error) {
	sc := &countersign.Scope{Classes: reasonClasses(reasons)}
	switch {
	case kind == countersign.KindRm:
		rmScope(sc, args)
		return sc, nil
	case kind != countersign.KindTool || in == nil:
		return sc, nil
	}
	if len(in.Commands) > 0 && action != "Bash" {
		return nil, countersign.Errorf(countersign.EINVALID, "scope.commands goes only with the Bash tool")
	}
	if len(in.Commands) > maxScopeCommands || len(in.Paths) > maxScopePaths {
		return nil, countersign.Errorf(countersign.EINVALID, "a scope names at most %d commands and %d paths", maxScopeCommands, maxScopePaths)
	}
	if in.Files < 0 || in.Bytes < 0 {
		return nil, countersign.Errorf(countersign.EINVALID, "scope.files and scope.bytes must not be negative")
	}
	line := bashCommand(args)
	for _, c := range in.Commands {
		if err := validText("each scope command", c, maxScopeCommand, true); err != nil {
			return nil, err
		}
		if strings.IndexFunc(c, unicode.IsControl) >= 0 || !strings.Contains(line, strings.Fields(c)[0]) {
			return nil, countersign.Errorf(countersign.EINVALID, "scope.commands must name commands of the command line")
		}
	}
	for _, p := range in.Paths {
		if err := validText("each scope path", p, maxScopePath, true); err != nil {
			return nil, err
		}
		if !path.IsAbs(p) || path.Clean(p) != p {
			return nil, countersign.Errorf(countersign.EINVALID, "scope.paths must be absolute and clean")
		}
	}
	sc.Commands, sc.Paths = sortedSet(in.Commands), sortedSet(in.Paths)
	sc.Files, sc.Bytes, sc.FilesCapped = in.Files, in.Bytes, in.FilesCapped
	return sc, nil
}

// rmScope fills the scope of an rm request from its arguments: every
// resolved target (the wrapper's "targets"), or the seed's affected_paths
// when it cannot have been cut at its limit of 50.
func rmScope(sc *countersign.Scope, args json.RawMessage) {
	var p struct {
		Targets         []string `json:"targets"`
		AffectedPaths   []string `json:"affected_paths"`
		FileCount       int64    `json:"file_count"`
		Bytes           int64    `json:"bytes"`
		FileCountCapped bool     `json:"file_count_capped"`
	}
	if json.Unmarshal(args, &p) != nil {
		return
	}
	paths := p.Targets
	if paths == nil && len(p.AffectedPaths) < 50 {
		paths = p.AffectedPaths
	}
	if len(paths) > maxScopePaths {
		return
	}
	for _, t := range paths {
		if !path.IsAbs(t) || path.Clean(t) != t || len(t) > maxScopePath {
			return // a path no tree can be checked against: no paths, no window covers it
		}
	}
	sc.Paths = sortedSet(paths)
	sc.Files, sc.Bytes, sc.FilesCapped = max(p.FileCount, 0), max(p.Bytes, 0), p.FileCountCapped
}

// bashCommand is the command line of a Bash call's arguments.
func bashCommand(args json.RawMessage) string {
	var in struct {
		Command string `json:"command"`
	}
	json.Unmarshal(args, &in)
	return in.Command
}

// sortedSet returns the strings sorted, each once; nil for none.
func sortedSet(list []string) []string {
	if len(list) == 0 {
		return nil
	}
	out := slices.Clone(list)
	slices.Sort(out)
	return slices.Compact(out)
}

// Parts of risk reasons that vary between two asks of the same kind: a
// count, or the target a protected path lies in.
var (
	reasonCount  = regexp.MustCompile(` \(\d+ paths?\)$`)
	reasonInside = regexp.MustCompile(` \(inside [^()]*\)$`)
)

// reasonClasses are the classes of risk reasons: the reason itself, but
// for the parts that vary with the size of a delete, which the paths of
// the scope bound instead. Two reasons of one class are the same risk.
func reasonClasses(reasons []string) []string {
	out := make([]string, 0, len(reasons))
	for _, r := range reasons {
		switch {
		case strings.HasPrefix(r, "large deletion:"):
			r = "large deletion"
		case strings.HasPrefix(r, "git work trees (could not check for uncommitted changes)"):
			r = "git work tree (could not check for uncommitted changes)"
		case strings.HasPrefix(r, "git work tree (could not check for uncommitted changes)"):
			r = "git work tree (could not check for uncommitted changes)"
		default:
			r = reasonInside.ReplaceAllString(reasonCount.ReplaceAllString(r, ""), "")
		}
		out = append(out, r)
	}
	return sortedSet(out)
}

// unbounded reports whether a risk reason says that what the call does
// could not be known before it runs: a computed command or target, a
// script read from a pipe or the network, a line that does not parse. No
// window covers such a call, whatever the approved one had: the human
// cannot have seen what it will do.
func unbounded(class string) bool {
	for _, s := range []string{"cannot be ", "computed", "too deeply", "does not parse", "could not"} {
		if strings.Contains(class, s) {
			return true
		}
	}
	return false
}

// covers reports whether the window w lets the request r through: r is
// of w's key, session, kind and action (the store's query), and of the
// shape the human approved — for a Bash call, only commands the approved
// line had; for deletes, only paths within the trees the human saw; for
// every kind, no class of risk the approved request lacked, and nothing
// whose effect could not be known when it asked.
func covers(w *countersign.AutoApproveWindow, r *countersign.Request) bool {
	ws, rs := w.Scope, r.Scope
	if ws == nil || rs == nil {
		return false // a window or a request from before scopes: asked
	}
	// The typed facts first: the same known tier, and nothing protected
	// unless the approved request was.
	if UnknownTier(r) || r.Tier != ws.Tier || (r.Protected && !ws.Protected) {
		return false
	}
	for _, c := range rs.Classes {
		if unbounded(c) || !slices.Contains(ws.Classes, c) {
			return false
		}
	}
	bash := r.Kind == countersign.KindTool && r.Action == "Bash"
	if bash && (len(ws.Commands) == 0 || len(rs.Commands) == 0) {
		return false
	}
	for _, c := range rs.Commands {
		if !slices.Contains(ws.Commands, c) {
			return false
		}
	}
	if r.Kind == countersign.KindRm && (len(rs.Paths) == 0 || len(ws.Paths) == 0) {
		return false
	}
	if !bash && len(ws.Paths) > 0 && len(rs.Paths) == 0 {
		return false // "touch only within" the paths: one that names none is not within them
	}
	for _, p := range rs.Paths {
		if !withinAny(p, ws.Paths) {
			return false
		}
	}
	return true
}

// windowScope is the scope a window opened on r keeps: r's shape, with its
// typed facts (tier, protected), against which covers checks later
// requests. A request without a scope gives none: its window covers
// nothing.
func windowScope(r *countersign.Request) *countersign.Scope {
	if r.Scope == nil {
		return nil
	}
	sc := *r.Scope
	sc.Tier, sc.Protected = r.Tier, r.Protected
	return &sc
}

// withinAny reports whether p is one of the roots or lies under one.
func withinAny(p string, roots []string) bool {
	for _, root := range roots {
		if p == root || strings.HasPrefix(p, strings.TrimSuffix(root, "/")+"/") {
			return true
		}
	}
	return false
}

// WindowTerms says in words what an auto-approve window opened on a
// request lets through, as the decision page shows it: a lead sentence,
// the conditions a later request must meet, one a line, and a closing
// sentence. They follow the rules of covers, so that the page says
// exactly what the window does.
type WindowTerms struct {
	Lead       string
	Conditions []string
	Tail       string
	// Opens is false when a window on the request would let nothing
	// through: it has no agent session, or a shape that cannot be
	// checked. Lead then says why.
	Opens bool
}

// DescribeWindow returns the terms of a window opened on r.
func DescribeWindow(r *countersign.Request) WindowTerms {
	sc := r.Scope
	bash := r.Kind == countersign.KindTool && r.Action == "Bash"
	switch {
	case r.Context.SessionID == "":
		return WindowTerms{Lead: "This request names no agent session, so no window can be opened on it."}
	case sc == nil, bash && len(sc.Commands) == 0, r.Kind == countersign.KindRm && len(sc.Paths) == 0, UnknownTier(r):
		return WindowTerms{Lead: "What this request does cannot be checked against later ones, so a window on it would let nothing else through: approve it once."}
	}
	for _, c := range sc.Classes {
		if unbounded(c) {
			return WindowTerms{Lead: "Part of what this request does is known only when it runs (" + c + "), so a window on it would let nothing else through: approve it once."}
		}
	}
	what := "requests of kind " + string(r.Kind)
	switch {
	case r.Kind == countersign.KindRm:
		what = "deletes through the rm wrapper"
	case bash:
		what = "shell commands (Bash)"
	case r.Kind == countersign.KindTool || r.Kind == countersign.KindMCP:
		what = "calls of the tool " + r.Action
	case WindowAction(r.Kind, r.Action) != "":
		what += " with the action " + r.Action
	}
	t := WindowTerms{Opens: true,
		Lead: "The window lets through, without asking, " + what + " of the agent key " + r.KeyName + " in the agent session " + r.Context.SessionID + " that:",
		Tail: "Anything else, and anything whose effect is known only when it runs, is asked as usual."}
	if bash {
		t.Conditions = append(t.Conditions, "run no command but "+strings.Join(sc.Commands, ", ")+" (each line may hold only these)")
	}
	switch {
	case len(sc.Paths) > 0 && (bash || r.Kind == countersign.KindRm):
		t.Conditions = append(t.Conditions, "delete only within "+strings.Join(sc.Paths, ", "))
	case len(sc.Paths) > 0:
		t.Conditions = append(t.Conditions, "touch only within "+strings.Join(sc.Paths, ", "))
	case bash:
		t.Conditions = append(t.Conditions, "delete nothing")
	}
	if r.Tier != "" {
		t.Conditions = append(t.Conditions, "are of the tier "+string(r.Tier))
	}
	if len(sc.Classes) == 0 {
		t.Conditions = append(t.Conditions, "give no reason to ask at all")
	} else {
		t.Conditions = append(t.Conditions, "give no reason to ask but: "+strings.Join(sc.Classes, "; "))
	}
	return t
}
