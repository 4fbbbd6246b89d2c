package saferm

import (
	"fmt"
	"os"
	"os/user"
	"strings"
	"time"
)

// maxAffectedPaths is the seed's limit on affected_paths.
const maxAffectedPaths = 50

// maxPreviewTargets bounds the targets listed in the preview, which is read
// on a phone; the payload's targets field carries them all.
const maxPreviewTargets = 20

// Payload is the approval request of one rm command. The first nine fields
// are the seed's POST /api/delete-requests body, names and meaning
// unchanged; the rest extend it.
type Payload struct {
	RequestID     string   `json:"request_id"`     // del_<unix>_<pid>
	Command       string   `json:"command"`        // shell-quoted reconstruction of argv
	RiskReasons   []string `json:"risk_reasons"`   // never null
	AffectedPaths []string `json:"affected_paths"` // the first 50 targets
	FileCount     int      `json:"file_count"`
	User          string   `json:"user"`
	Hostname      string   `json:"hostname"`
	Cwd           string   `json:"cwd"`
	Timestamp     int64    `json:"timestamp"` // Unix seconds

	Args            []string `json:"args"`    // rm's arguments exactly, wrapper flags removed
	Targets         []string `json:"targets"` // every resolved absolute target: what an approval covers
	Missing         []string `json:"missing"` // targets that did not exist
	FileCountCapped bool     `json:"file_count_capped"`
	Bytes           int64    `json:"bytes"`
	Recursive       bool     `json:"recursive"`
	Force           bool     `json:"force"`
	Preview         string   `json:"preview"` // what the human reads and approves
}

// RequestContext is who asks, from where and when.
type RequestContext struct {
	User     string
	Hostname string
	Cwd      string
	PID      int
	Now      time.Time
}

// CurrentContext describes the running process in cwd: user name (from the
// user database or $USER, else the uid), host name, pid and the wall clock.
func CurrentContext(cwd string) RequestContext {
	rc := RequestContext{Cwd: cwd, PID: os.Getpid(), Now: time.Now()}
	if u, err := user.Current(); err == nil {
		rc.User = u.Username
	}
	if rc.User == "" {
		// A uid without a passwd entry (containers) still names someone.
		rc.User = fmt.Sprintf("uid %d", os.Getuid())
	}
	rc.Hostname, _ = os.Hostname()
	return rc
}

// BuildPayload builds the approval request for an assessed command.
func BuildPayload(a *Assessment, rmArgs []string, rc RequestContext) Payload {
	affected := a.Targets
	if len(affected) > maxAffectedPaths {
		affected = affected[:maxAffectedPaths]
	}
	return Payload{
		RequestID:       fmt.Sprintf("del_%d_%d", rc.Now.Unix(), rc.PID),
		Command:         Command(rmArgs),
		RiskReasons:     nonNil(a.Reasons),
		AffectedPaths:   nonNil(affected),
		FileCount:       a.FileCount,
		User:            rc.User,
		Hostname:        rc.Hostname,
		Cwd:             rc.Cwd,
		Timestamp:       rc.Now.Unix(),
		Args:            nonNil(rmArgs),
		Targets:         nonNil(a.Targets),
		Missing:         nonNil(a.Missing),
		FileCountCapped: a.FileCountCapped,
		Bytes:           a.Bytes,
		Recursive:       a.Recursive,
		Force:           a.Force,
		Preview:         Preview(a, rmArgs, rc),
	}
}

// nonNil makes a nil slice encode as [] rather than null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Preview is the text a human judges the request by, on a phone: first a
// plain sentence of what will be deleted, then the targets, the reasons,
// the working directory and the exact command.
func Preview(a *Assessment, rmArgs []string, rc RequestContext) string {
	var b strings.Builder
	b.WriteString(Headline(a, rc))
	b.WriteString("\n\nTargets:\n")
	writeTargets(&b, a, maxPreviewTargets)
	if len(a.Reasons) > 0 {
		b.WriteString("Why it asks:\n")
		for _, r := range a.Reasons {
			fmt.Fprintf(&b, "  - %s\n", r)
		}
	}
	fmt.Fprintf(&b, "In: %s\n", displayPath(rc.Cwd))
	fmt.Fprintf(&b, "Command: %s", Command(rmArgs))
	return b.String()
}

// Headline says in one line what the deletion does, e.g. "Delete 3 paths
// recursively (47 files, 1.2 MB) on prod-01 as deploy".
func Headline(a *Assessment, rc RequestContext) string {
	what := plural(len(a.Targets), "path", "paths")
	what = fmt.Sprintf("%d %s", len(a.Targets), what)
	if len(a.Targets) == 1 {
		what = displayPath(a.Targets[0])
	}
	how := ""
	if a.Recursive {
		how = " recursively"
	}
	files := fmt.Sprintf("%d %s", a.FileCount, plural(a.FileCount, "file", "files"))
	if a.FileCountCapped {
		files = fmt.Sprintf("at least %d files", a.FileCount)
	}
	s := fmt.Sprintf("Delete %s%s (%s, %s)", what, how, files, FormatBytes(a.Bytes))
	if rc.Hostname != "" {
		s += " on " + rc.Hostname
	}
	if rc.User != "" {
		s += " as " + rc.User
	}
	return s
}

// writeTargets lists up to max targets, one per line, marking missing ones.
func writeTargets(b *strings.Builder, a *Assessment, max int) {
	missing := make(map[string]bool, len(a.Missing))
	for _, m := range a.Missing {
		missing[m] = true
	}
	for i, t := range a.Targets {
		if i == max {
			fmt.Fprintf(b, "  … and %d more\n", len(a.Targets)-max)
			break
		}
		note := ""
		if missing[t] {
			note = " (does not exist)"
		}
		fmt.Fprintf(b, "  %s%s\n", displayPath(t), note)
	}
}

// FormatBytes renders n in decimal units with one decimal: "1.2 MB".
func FormatBytes(n int64) string {
	if n < 1000 {
		return fmt.Sprintf("%d B", n)
	}
	units := []string{"kB", "MB", "GB", "TB", "PB", "EB"}
	v := float64(n) / 1000
	i := 0
	for v >= 999.95 && i < len(units)-1 {
		v /= 1000
		i++
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// plural picks the word form for n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// The environment the Claude Code hook gives a shell command it allowed
// with a human's approval that covers the command's deletes: the approved
// request's id, the agent session and, for a coding agent other than
// Claude Code, the agent (whose sessions the server keeps apart). The
// wrapper names the approval in its own request, and the server grants
// that request at once when the approval was for exactly this delete; a
// made-up or reused id gets nothing but the usual question.
const (
	EnvApproval = "COUNTERSIGN_APPROVAL"
	EnvSession  = "COUNTERSIGN_SESSION"
	EnvAgent    = "COUNTERSIGN_AGENT"
)
