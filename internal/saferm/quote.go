package saferm

import (
	"strings"

	"github.com/countersign/countersign/internal/shellword"
)

// Command reconstructs the rm command line as a shell would need it typed:
// "rm" followed by every argument, quoted where needed.
func Command(rmArgs []string) string {
	var b strings.Builder
	b.WriteString("rm")
	for _, a := range rmArgs {
		b.WriteByte(' ')
		b.WriteString(ShellQuote(a))
	}
	return b.String()
}

// ShellQuote quotes s for a POSIX shell (shellword.Quote): plain words
// stay as they are, other strings are single-quoted, and strings with
// control, format or invalid bytes use $'…' escapes, so that a file name
// can never break a line or reorder text in what a human reads.
func ShellQuote(s string) string { return shellword.Quote(s) }

// displayPath renders a path for a human: as is when it is plain, quoted
// otherwise, so that spaces and control characters are visible.
func displayPath(p string) string { return ShellQuote(p) }
