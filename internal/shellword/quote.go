package shellword

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Quote quotes s for a POSIX shell. Plain words stay as they are; other
// strings are single-quoted; strings with control, format or invalid bytes
// use $'…' escapes so that a file name can never break a line or reorder
// text in what a human reads (a newline or U+202E in a name is shown
// escaped, not obeyed).
func Quote(s string) string {
	if s != "" && isPlainWord(s) {
		return s
	}
	if !needsEscapes(s) {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\'' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case !unicode.IsPrint(r) && r < 0x10000:
			fmt.Fprintf(&b, `\u%04x`, r)
		case !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	b.WriteByte('\'')
	return b.String()
}

// isPlainWord reports whether s needs no quoting in any common shell. A
// leading "=" is quoted because zsh expands "=cmd".
func isPlainWord(s string) bool {
	if s[0] == '=' {
		return false
	}
	for _, c := range []byte(s) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("@%+=:,./_-", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

// needsEscapes reports whether s holds anything single quotes would carry
// through verbatim but a reader should not see raw.
func needsEscapes(s string) bool {
	if !utf8.ValidString(s) {
		return true
	}
	for _, r := range s {
		if !unicode.IsPrint(r) && r != ' ' {
			return true
		}
	}
	return false
}
