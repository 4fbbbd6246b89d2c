// Package shellword reads the value of a shell word from its text alone,
// as Bash would give it before the command runs. The Claude Code hook
// reads a command line with it, and the server reads which paths a hook
// approval covers with it, so that the two never read a word differently.
package shellword

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Literal returns the value of a word made only of literal parts: plain
// text (its backslashes removed), '…' and "…" without expansions, and a
// leading ~ or ~/ when home is not empty. A ~user, a ~ without a home,
// $'…' and every expansion make the word unknown (ok false).
func Literal(w *syntax.Word, home string) (string, bool) {
	var b strings.Builder
	for i, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			v := p.Value
			if i == 0 && strings.HasPrefix(v, "~") {
				name, rest, _ := strings.Cut(v, "/")
				if name != "~" || home == "" {
					return "", false // ~user, or no home to expand to
				}
				b.WriteString(home)
				if rest != "" || strings.Contains(v, "/") {
					v = "/" + rest
				} else {
					v = ""
				}
			}
			b.WriteString(Unescape(v, false))
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false // $'…' escapes: rare enough to treat as unknown
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", false
			}
			for _, dp := range p.Parts {
				l, ok := dp.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(Unescape(l.Value, true))
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// Unescape removes the shell's backslashes from literal text: outside
// quotes every backslash escapes the next character; inside double quotes
// (double true) only $, `, ", \ and a newline are escaped.
func Unescape(s string, double bool) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		next := s[i+1]
		if double && !strings.ContainsRune("$`\"\\\n", rune(next)) {
			b.WriteByte(c)
			continue
		}
		i++
		if next != '\n' {
			b.WriteByte(next)
		}
	}
	return b.String()
}
