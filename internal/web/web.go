// Package web holds the pages and static files (the inbox's, and the
// standalone MCP gateway's local confirmation page), embedded in the
// binary and parsed at start-up, so that a broken template fails at boot and
// not in front of a user.
package web

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/visible"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Static returns the static files (CSS and the one script), served under
// /static/.
func Static() fs.FS {
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err) // the embed pattern guarantees the folder
	}
	return sub
}

// Pages are the parsed templates, one per page, each with the layout.
type Pages struct {
	pages map[string]*template.Template
}

// Parse parses every page. It fails when a template is broken.
func Parse() (*Pages, error) {
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("parse layout: %w", err)
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	p := &Pages{pages: make(map[string]*template.Template)}
	for _, n := range names {
		name := strings.TrimPrefix(n, "templates/")
		if name == "layout.html" {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(templateFS, n)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", name, err)
		}
		p.pages[strings.TrimSuffix(name, ".html")] = t
	}
	return p, nil
}

// Render writes a page. It renders into a buffer first, so that a failing
// template never sends half a page.
func (p *Pages) Render(w io.Writer, page string, data any) error {
	t, ok := p.pages[page]
	if !ok {
		return fmt.Errorf("no page %q", page)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", data); err != nil {
		return fmt.Errorf("render %s: %w", page, err)
	}
	_, err := buf.WriteTo(w)
	return err
}

var funcs = template.FuncMap{
	"visible":  visible.String, // every value an agent wrote, the one rule of every surface
	"rfc3339":  func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"when":     func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"lines":    firstLines,
	"hasLines": func(s string, n int) bool { return strings.Count(s, "\n") >= n },
	"join":     strings.Join,
	"wrap":     wrap,
	// codingAgent names the coding agent of a request's context.agent.
	"codingAgent": func(a string) string {
		if n := countersign.CodingAgents[a]; n != "" {
			return n
		}
		return a
	},
}

// wrapAfter are the characters after which a long path or identifier may
// break across lines.
const wrapAfter = "/._-:=&?,@"

// wrapRun is the length from which a run of characters without a space
// gets places to break at its separators.
const wrapRun = 16

// wrap escapes s for HTML and lets its long paths and identifiers break
// at their separators (a <wbr> after / . _ - and the like), so that a
// narrow screen never breaks one in the middle of a word where a
// separator would do. Short words are left as they are.
func wrap(s string) template.HTML {
	var b strings.Builder
	b.Grow(len(s) + len(s)/8)
	run := 0 // length of the run without a space that ends here
	for i := 0; i < len(s); {
		end := i + 1
		for end < len(s) && !utf8.RuneStart(s[end]) {
			end++
		}
		c := s[i:end]
		b.WriteString(template.HTMLEscapeString(c))
		if strings.TrimSpace(c) == "" {
			run = 0
		} else {
			run++
		}
		if len(c) == 1 && strings.Contains(wrapAfter, c) && end < len(s) && longRun(s, i, run) {
			b.WriteString("<wbr>")
		}
		i = end
	}
	return template.HTML(b.String())
}

// longRun reports whether the run without a space around s[i] is at least
// wrapRun bytes long, run of them before it counted.
func longRun(s string, i, run int) bool {
	if run >= wrapRun {
		return true
	}
	for j := i + 1; j < len(s) && j-i+run < wrapRun+1; j++ {
		if s[j] == ' ' || s[j] == '\n' || s[j] == '\t' {
			return false
		}
	}
	return len(s)-i+run > wrapRun
}

// firstLines returns the first n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
