package web

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io"
)

//go:embed local/*.html
var localFS embed.FS

// LocalPages are the pages of the standalone MCP gateway's confirmation
// server on 127.0.0.1: the confirmation page and the private file that
// leads the browser to it. They stand alone, without the inbox's layout
// or static files: that server serves nothing else, and its Content
// Security Policy allows nothing else.
type LocalPages struct {
	confirm, redirect *template.Template
}

// LocalConfirm is the data of the local confirmation page.
type LocalConfirm struct {
	Ref, Status, Preview, Expires, Done string
	Pending                             bool
}

// ParseLocal parses the local pages. It fails when a template is broken.
func ParseLocal() (*LocalPages, error) {
	confirm, err := template.New("confirm.html").Funcs(funcs).ParseFS(localFS, "local/confirm.html")
	if err != nil {
		return nil, fmt.Errorf("parse the local confirmation page: %w", err)
	}
	redirect, err := template.New("redirect.html").ParseFS(localFS, "local/redirect.html")
	if err != nil {
		return nil, fmt.Errorf("parse the local redirect page: %w", err)
	}
	return &LocalPages{confirm: confirm, redirect: redirect}, nil
}

// Confirm writes the confirmation page of a request.
func (p *LocalPages) Confirm(w io.Writer, data LocalConfirm) error {
	return render(w, p.confirm, data)
}

// Redirect writes the file that sends the browser to link, the page's
// one-time link, and sends no referrer.
func (p *LocalPages) Redirect(w io.Writer, link string) error {
	return render(w, p.redirect, link)
}

// render executes t into a buffer first, so that a failing template never
// writes half a page.
func render(w io.Writer, t *template.Template, data any) error {
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return fmt.Errorf("render %s: %w", t.Name(), err)
	}
	_, err := buf.WriteTo(w)
	return err
}
