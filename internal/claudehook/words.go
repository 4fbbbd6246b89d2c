package claudehook

import (
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// word is one shell word as far as it is known before the command runs.
// A word is static when its value is fixed by the text alone: literals,
// quotes, escapes, braces and a leading ~. Anything the shell computes
// when it runs — $VAR, $(cmd), `cmd`, $((…)), <(…) — makes it dynamic.
type word struct {
	val    string // the value, when static
	src    string // the source text
	static bool
}

// lit returns a static word.
func lit(v string) word { return word{val: v, src: v, static: true} }

// text is what a rule sees of the word: its value, or its source text.
func (w word) text() string {
	if w.static {
		return w.val
	}
	return w.src
}

// maxBraceWords bounds brace expansion; a word that expands to more is
// treated as unknown.
const maxBraceWords = 64

// words resolves a command's words, brace expansion included.
func words(ws []*syntax.Word, home string) []word {
	out := make([]word, 0, len(ws))
	for _, w := range ws {
		out = append(out, resolveWord(w, home)...)
	}
	return out
}

// resolveWord resolves one word into the words it expands to.
func resolveWord(w *syntax.Word, home string) []word {
	cp := *w // SplitBraces replaces the parts
	if !syntax.SplitBraces(&cp) {
		return []word{oneWord(w, home)}
	}
	var out []word
	for bw, err := range expand.BracesSeq(nil, &cp) {
		if err != nil || len(out) == maxBraceWords {
			return []word{{src: printWord(w)}}
		}
		out = append(out, oneWord(bw, home))
	}
	return out
}

// oneWord resolves a word without braces.
func oneWord(w *syntax.Word, home string) word {
	v, ok := literal(w, home)
	if !ok {
		return word{src: printWord(w)}
	}
	return word{val: v, src: printWord(w), static: true}
}

// literal returns the value of a word made only of literal parts.
func literal(w *syntax.Word, home string) (string, bool) {
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
			b.WriteString(unescape(v, false))
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
				b.WriteString(unescape(l.Value, true))
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// unescape removes the shell's backslashes: outside quotes every
// backslash escapes the next character; inside double quotes only $, `,
// ", \ and a newline are escaped.
func unescape(s string, double bool) string {
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

// heredoc returns the text of a here-document or here-string body when it
// holds no expansion.
func heredoc(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			b.WriteString(p.Value)
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false
			}
			b.WriteString(p.Value)
		default:
			return "", false
		}
	}
	return b.String(), true
}

// printWord returns the source text of a word.
func printWord(w *syntax.Word) string {
	var b strings.Builder
	if err := syntax.NewPrinter().Print(&b, w); err != nil {
		return "?"
	}
	return b.String()
}

// joinWords is a command as rules see it: its words joined by spaces.
func joinWords(ws []word) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = w.text()
	}
	return strings.Join(parts, " ")
}
