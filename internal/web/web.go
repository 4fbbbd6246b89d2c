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
}

// firstLines returns the first n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
