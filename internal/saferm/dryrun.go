package saferm

import (
	"fmt"
	"strings"
)

// FormatDryRun renders what the wrapper would do with an assessed command:
// the verdict first (pass, ask or block, and why), then the targets, the
// counts, the flags and the reasons. realRm is the rm it would run.
func FormatDryRun(a *Assessment, g Guard, realRm string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "session: %s (%s)\n", guardWord(g), g.Reason)
	b.WriteString("verdict: " + verdictLine(a, g, realRm) + "\n")
	if !g.Guarded {
		b.WriteString("in a guarded session: " + verdictLine(a, Guard{Guarded: true}, realRm) + "\n")
	}
	if a.Blocked {
		return b.String()
	}
	fmt.Fprintf(&b, "targets (%d):\n", len(a.Targets))
	writeTargets(&b, a, len(a.Targets))
	files := fmt.Sprintf("%d", a.FileCount)
	if a.FileCountCapped {
		files = fmt.Sprintf("at least %d (count stopped at the cap)", a.FileCount)
	}
	fmt.Fprintf(&b, "files: %s\nbytes: %s (%d)\n", files, FormatBytes(a.Bytes), a.Bytes)
	fmt.Fprintf(&b, "recursive: %t\nforce: %t\n", a.Recursive, a.Force)
	if len(a.Reasons) == 0 {
		b.WriteString("reasons: none\n")
	} else {
		b.WriteString("reasons:\n")
		for _, r := range a.Reasons {
			fmt.Fprintf(&b, "  - %s\n", r)
		}
	}
	if a.Exempt {
		b.WriteString("every target matches a safe pattern: the reasons do not apply\n")
	}
	return b.String()
}

// guardWord names the session's state.
func guardWord(g Guard) string {
	if g.Guarded {
		return "guarded"
	}
	return "not guarded"
}

// verdictLine says what would happen, in the session as it is.
func verdictLine(a *Assessment, g Guard, realRm string) string {
	if !g.Guarded {
		return "would pass straight to " + realRm
	}
	switch a.Verdict() {
	case VerdictBlock:
		return "would block (exit 1, no request): " + a.BlockReason
	case VerdictAsk:
		return "would ask for approval, then run " + realRm
	}
	return "would pass to " + realRm
}
