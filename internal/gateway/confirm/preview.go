package confirm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/limit"
	"github.com/countersign/countersign/internal/visible"
)

// Limits of the preview, so that it reads on a phone and stays far below
// the service's 16 KiB limit whatever the model sends.
const (
	previewArgsBudget = 8 << 10 // bytes of pretty-printed arguments shown
	previewString     = 600     // characters of one string value shown
	previewText       = 300     // characters of the upstream's title or description shown
)

// Preview is the trusted text a human approves: built by the gateway alone,
// from the upstream's tool definition (shown as data, quoted) and the
// arguments pretty-printed as JSON, so that nothing the model sends can
// look like the gateway's own lines. JSON quoting keeps newlines in values
// from forging lines; invisible and direction-changing characters are
// escaped by the rule of every surface (visible.String); long values and long argument lists are cut with a visible
// mark. The argument hash in the binding covers the whole call, cut or not.
func Preview(t gateway.CalledTool, args json.RawMessage) string {
	var b strings.Builder
	fmt.Fprintf(&b, "MCP tool call through countersign\n")
	fmt.Fprintf(&b, "Tool:     %s\n", t.Name)
	fmt.Fprintf(&b, "Server:   %s (its tool %s)\n", t.Upstream, quoteData(t.Tool, previewText))
	fmt.Fprintf(&b, "Tier:     %s\n", t.Tier)
	if t.Title != "" {
		fmt.Fprintf(&b, "Title:    %s (as the server describes it)\n", quoteData(t.Title, previewText))
	}
	if t.Description != "" {
		fmt.Fprintf(&b, "About:    %s (as the server describes it)\n", quoteData(t.Description, previewText))
	}
	shown, size, cut := prettyArguments(args)
	fmt.Fprintf(&b, "Arguments (%d bytes):\n%s", size, shown)
	if cut {
		fmt.Fprintf(&b, "\n[arguments cut for display: see the full call under Arguments; the approval covers exactly the call as sent]")
	}
	return b.String()
}

// quoteData shows an untrusted one-line text as a quoted string: newlines
// and invisible characters escaped, cut at max characters.
func quoteData(s string, max int) string {
	s = cutString(s, max)
	return visible.String(strconvQuote(s))
}

// strconvQuote quotes like JSON, which escapes control characters but keeps
// other characters readable.
func strconvQuote(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// prettyArguments indents the arguments, cutting long strings and the
// whole text at its budget. It returns the text, the size of the arguments
// as sent and whether anything was cut.
func prettyArguments(raw json.RawMessage) (string, int, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers exactly as sent
	var v any
	if err := dec.Decode(&v); err != nil {
		return visible.String(strconvQuote(string(raw))), len(raw), false
	}
	v, cut := cutStrings(v)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	// Indented within the budget only: the indentation of every line
	// grows with its depth, and the whole rendering could be many times
	// the arguments.
	out, more := limit.Indent(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), previewArgsBudget)
	if more > 0 {
		end := strings.LastIndexByte(out, '\n')
		if end <= 0 {
			end = len(out)
		}
		out = out[:end] + fmt.Sprintf("\n… [%d more bytes of arguments not shown]", len(out)-end+more)
		cut = true
	}
	return visible.String(out), len(raw), cut
}

// cutStrings shortens every string value longer than previewString
// characters, marking the cut inside the value.
func cutStrings(v any) (any, bool) {
	switch x := v.(type) {
	case string:
		if utf8.RuneCountInString(x) > previewString {
			return cutString(x, previewString), true
		}
		return x, false
	case []any:
		cut := false
		for i := range x {
			var c bool
			x[i], c = cutStrings(x[i])
			cut = cut || c
		}
		return x, cut
	case map[string]any:
		cut := false
		for k := range x {
			var c bool
			x[k], c = cutStrings(x[k])
			cut = cut || c
		}
		return x, cut
	}
	return v, false
}

// cutString keeps the first max characters of s and says how many follow.
func cutString(s string, max int) string {
	n := utf8.RuneCountInString(s)
	if n <= max {
		return s
	}
	rs := []rune(s)
	return string(rs[:max]) + fmt.Sprintf("… [%d more characters not shown]", n-max)
}
