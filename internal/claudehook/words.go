package claudehook

import (
	"strings"

	"github.com/countersign/countersign/internal/shellword"
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
	v, ok := shellword.Literal(w, home)
	if !ok {
		return word{src: printWord(w)}
	}
	return word{val: v, src: printWord(w), static: true}
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
