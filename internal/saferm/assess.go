package saferm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Assessor judges rm command lines against one policy, from one working
// directory and home directory. Build it with Config.Assessor or fill every
// field; Cwd must be absolute.
type Assessor struct {
	Cwd            string
	Home           string   // "" when there is none
	Protected      []string // absolute paths; see protectionReason
	SafePatterns   []string // absolute shell patterns
	FileThreshold  int      // more files than this is a risk
	BytesThreshold int64    // more bytes than this is a risk
	FileCap        int      // the tally stops here; 0 means DefaultFileCap
	Git            string   // git executable; "" looks it up in PATH
	GitTimeout     time.Duration
	// Strict makes -r and -f reasons by themselves, as in the seed, even
	// for files git could bring back.
	Strict bool
	// LineStart is when the command line running rm started (its shell),
	// or zero: a directory in the temporary directory made since then is
	// the line's own.
	LineStart time.Time
}

// Assessment is the verdict on one rm command line.
type Assessment struct {
	Blocked         bool     // hard-blocked: exit 1, no request
	BlockReason     string   // why, when Blocked
	Reasons         []string // risk reasons, seed wording where the seed has one
	Targets         []string // absolute; symlinks resolved in the parent, not the final component
	Missing         []string // the targets that do not exist
	Exempt          bool     // every target matches a safe pattern
	FileCount       int      // files the deletion removes, up to the cap
	FileCountCapped bool     // the tally stopped at the cap: FileCount is a lower bound
	Bytes           int64    // bytes of those files
	Recursive       bool
	Force           bool
	NeedsApproval   bool // not blocked, not exempt, and at least one reason
	// Protected is set when a target is, lies in or holds a protected
	// path: the request carries it as a fact for the server's rules.
	Protected bool
}

// Verdict is what the wrapper does with an assessed command.
type Verdict string

// Verdicts.
const (
	VerdictPass  Verdict = "pass"  // run the real rm
	VerdictAsk   Verdict = "ask"   // ask a human first
	VerdictBlock Verdict = "block" // refuse, exit 1
)

// Verdict returns what to do with the command in a guarded session.
func (a *Assessment) Verdict() Verdict {
	switch {
	case a.Blocked:
		return VerdictBlock
	case a.NeedsApproval:
		return VerdictAsk
	}
	return VerdictPass
}

// Assess judges rm's arguments (the wrapper's flags removed). It never
// fails: what it cannot find out becomes a reason to ask.
func (a *Assessor) Assess(ctx context.Context, rmArgs []string) *Assessment {
	flags := ParseRmArgs(rmArgs)
	res := &Assessment{Recursive: flags.Recursive, Force: flags.Force}
	env := a.env()
	for _, op := range flags.Operands {
		if op == "" {
			continue // rm fails on an empty name and deletes nothing
		}
		if why := literalBlock(op); why != "" {
			return res.block(why)
		}
		for _, p := range a.expand(op) {
			target, full := resolve(a.Cwd, p)
			if why := env.block(op, target, full); why != "" {
				return res.block(why)
			}
			res.addTarget(target)
		}
	}
	a.judge(ctx, res, flags, env)
	return res
}

// block marks the assessment hard-blocked.
func (res *Assessment) block(why string) *Assessment {
	res.Blocked, res.BlockReason = true, why
	return res
}

// addTarget records a target once.
func (res *Assessment) addTarget(t string) {
	for _, have := range res.Targets {
		if have == t {
			return
		}
	}
	res.Targets = append(res.Targets, t)
}

// judge collects the risk reasons for the resolved targets. -r and -f
// are reasons only for what could not be had back after the delete: files
// that git ignores or holds committed and unchanged, and a temporary
// directory made by the command line that deletes it, are not reasons by
// themselves — unless Strict, the seed's rule, where -r and -f always are.
func (a *Assessor) judge(ctx context.Context, res *Assessment, flags RmFlags, env assessEnv) {
	existing := a.existing(res)
	safe := resolvePatterns(a.SafePatterns)
	res.Exempt = len(res.Targets) > 0
	for _, t := range res.Targets {
		res.Exempt = res.Exempt && matchesSafe(t, safe)
	}
	work, notes, lost := a.count(res, existing, flags.Recursive)
	var gitReasons []string
	if !res.Exempt {
		gitReasons = a.gitReasons(ctx, work)
	}
	recoverable := !a.Strict && !lost && len(notes) == 0 && len(gitReasons) == 0
	if len(existing) > 0 && flags.Recursive && !recoverable {
		res.reason("recursive deletion (-r/-R)")
	}
	if len(existing) > 0 && flags.Force && !recoverable {
		res.reason("forced deletion (-f)")
	}
	if flags.NoPreserveRoot {
		res.reason("--no-preserve-root")
	}
	for _, t := range res.Targets {
		why := protectionReason(t, env.protected)
		res.Protected = res.Protected || why != ""
		res.reason(why)
	}
	for _, n := range notes {
		res.reason(n)
	}
	a.thresholdReasons(res)
	res.Reasons = append(res.Reasons, gitReasons...)
	res.NeedsApproval = !res.Exempt && len(res.Reasons) > 0
}

// reason adds a non-empty reason once.
func (res *Assessment) reason(r string) {
	if r == "" {
		return
	}
	for _, have := range res.Reasons {
		if have == r {
			return
		}
	}
	res.Reasons = append(res.Reasons, r)
}

// existing returns the targets that exist with their file info and notes
// the missing ones: rm -f on a missing file deletes nothing.
func (a *Assessor) existing(res *Assessment) map[string]os.FileInfo {
	out := make(map[string]os.FileInfo, len(res.Targets))
	for _, t := range res.Targets {
		fi, err := os.Lstat(t)
		if err != nil {
			res.Missing = append(res.Missing, t)
			continue
		}
		out[t] = fi
	}
	return out
}

// count tallies files and bytes — walking directories only for recursive
// deletes, since rm without -r removes no directory contents — and
// collects the git work trees the deletion touches, the reasons it finds
// on the way (.git data), and whether a target lies where nothing could
// bring it back: outside any git work tree, and not a temporary directory
// of the command line.
func (a *Assessor) count(res *Assessment, existing map[string]os.FileInfo, recursive bool) (work gitWork, notes []string, lost bool) {
	t := &tally{cap: a.FileCap}
	if t.cap <= 0 {
		t.cap = DefaultFileCap
	}
	work = gitWork{}
	cache := map[string]bool{}
	var fresh []string
	for _, target := range res.Targets {
		fi, ok := existing[target]
		if !ok {
			continue
		}
		switch root := findWorkTree(target, cache); {
		case inGitDir(target):
			notes = append(notes, "git repository data (.git): "+displayPath(target))
		case a.freshTemp(target, fi):
			fresh = append(fresh, target)
		case root != "":
			rel, _ := filepath.Rel(root, target)
			work.add(root, rel, root == target)
		default:
			lost = true
		}
		switch {
		case !fi.IsDir():
			if !t.full() {
				t.addFile(fi.Size())
			}
		case recursive:
			t.walk(target)
		}
	}
	for _, r := range t.repos {
		if slices.ContainsFunc(fresh, func(f string) bool { return strings.HasPrefix(r, f+"/") }) {
			continue // the line's own, a clone in its temporary directory
		}
		work.add(r, "", true)
		// A repository deleted whole takes its history with it: nothing
		// brings back what it held.
		lost = true
	}
	res.FileCount, res.FileCountCapped, res.Bytes = t.files, t.capped, t.bytes
	return work, notes, lost
}

// thresholdReasons flags large deletions. A capped tally counts as over the
// file threshold: the real number is unknown, so ask.
func (a *Assessor) thresholdReasons(res *Assessment) {
	switch {
	case res.FileCountCapped:
		res.reason(fmt.Sprintf("large deletion: at least %d files (threshold %d)", res.FileCount, a.FileThreshold))
	case res.FileCount > a.FileThreshold:
		res.reason(fmt.Sprintf("large deletion: %d files (threshold %d)", res.FileCount, a.FileThreshold))
	}
	if res.Bytes > a.BytesThreshold {
		res.reason(fmt.Sprintf("large deletion: %s (threshold %s)", FormatBytes(res.Bytes), FormatBytes(a.BytesThreshold)))
	}
}

// expand expands a pattern the shell left unexpanded (quoted, or run
// without a shell). The matches are assessed instead of the literal: a
// superset of what rm will delete, which only makes asking likelier. A
// pattern matching nothing is kept literally.
func (a *Assessor) expand(op string) []string {
	if !hasMeta(op) {
		return []string{op}
	}
	pat := op
	if !filepath.IsAbs(pat) {
		pat = escapeMeta(a.Cwd) + "/" + pat
	}
	m, err := filepath.Glob(pat)
	if err != nil || len(m) == 0 {
		return []string{op}
	}
	return m
}

// escapeMeta quotes the pattern characters of a literal path, so that a
// working directory named "[x]" is not read as a pattern.
func escapeMeta(p string) string {
	var b strings.Builder
	for _, c := range p {
		if strings.ContainsRune(`*?[\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// literalBlock refuses the seed's hard-blocked operands as typed: "/", "~",
// ".", "..", "$HOME" that reached rm unexpanded, and any path whose last
// component is "." or ".." (GNU rm refuses those too; "a/.." is the
// directory holding a, wherever a symlink a points).
func literalBlock(op string) string {
	trimmed := strings.TrimRight(op, "/")
	if trimmed == "" && op != "" {
		trimmed = "/"
	}
	switch trimmed {
	case "/", "~", ".", "..", "$HOME", "${HOME}":
		return fmt.Sprintf("refusing to delete %s: hard-blocked path", ShellQuote(op))
	}
	if base := filepath.Base(trimmed); strings.HasSuffix(trimmed, "/"+base) && (base == "." || base == "..") {
		return fmt.Sprintf("refusing to delete %s: its last component is %s", ShellQuote(op), base)
	}
	return ""
}
