package notify

import (
	"bytes"
	"embed"
	"encoding/json"
	htmltemplate "html/template"
	"net/url"
	"strings"
	"sync"
	texttemplate "text/template"
	"time"
	"unicode/utf8"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/limit"
	"github.com/countersign/countersign/internal/visible"
)

// EventTest is the event of a test message.
const EventTest = "test"

// Message is one notification, ready to render for any channel.
type Message struct {
	Event      string               // countersign.EventCreated, …, or EventTest
	DeliveryID string               // the outbox item's id; empty for a test
	Account    string               // account name
	Channel    string               // channel name
	Request    *countersign.Request // nil for a test
	InboxURL   string
	// Links maps a link action (approve, deny, stop) to the URL of its
	// confirm page; empty for channels that carry no links.
	Links map[string]string
	Now   time.Time
}

// maxTargets bounds the targets a message lists, maxTargetText the bytes
// an e-mail shows of each.
const (
	maxTargets    = 20
	maxTargetText = 512
)

// Ref is the request's reference code as people read it.
func (m *Message) Ref() string {
	if m.Request == nil {
		return ""
	}
	return countersign.FormatReference(m.Request.Reference)
}

// Headline is the first line of the action, with control characters made
// visible, shortened to n characters.
func (m *Message) Headline(n int) string {
	if m.Request == nil {
		return ""
	}
	line, _, _ := strings.Cut(visible.String(m.Request.Action), "\n")
	return shorten(line, n)
}

// Targets returns the request's targets (the paths of a delete) from its
// arguments, at most maxTargets of them, and how many more there are.
func (m *Message) Targets() ([]string, int) {
	if m.Request == nil || len(m.Request.Arguments) == 0 {
		return nil, 0
	}
	var args map[string]json.RawMessage
	if json.Unmarshal(m.Request.Arguments, &args) != nil {
		return nil, 0
	}
	for _, key := range []string{"targets", "affected_paths", "paths"} {
		var list []string
		if json.Unmarshal(args[key], &list) == nil && len(list) > 0 {
			if len(list) > maxTargets {
				return list[:maxTargets], len(list) - maxTargets
			}
			return list, 0
		}
	}
	return nil, 0
}

// Outcome says in a few words what became of the request.
func (m *Message) Outcome() string {
	r := m.Request
	if r == nil {
		return ""
	}
	switch r.Status {
	case countersign.StatusPending:
		return "waits for a decision"
	case countersign.StatusApproved, countersign.StatusConsumed:
		if r.DecidedBy == countersign.DecidedByAutoApprove {
			return "approved by an auto-approve window"
		}
		return "approved by " + r.DecidedBy
	case countersign.StatusDenied:
		return "denied by " + r.DecidedBy
	case countersign.StatusResponded:
		return "answered by " + r.DecidedBy
	case countersign.StatusStopped:
		return "session stopped by " + r.DecidedBy
	case countersign.StatusExpired:
		return "expired without a decision"
	case countersign.StatusCancelled:
		return "cancelled by the agent"
	}
	return string(r.Status)
}

// Subject is the e-mail subject.
func (m *Message) Subject() string {
	switch {
	case m.Request == nil:
		return "countersign: test message for channel " + m.Channel
	case m.Event == countersign.EventCreated && m.Request.Status == countersign.StatusPending:
		return "Approve? " + m.Ref() + ": " + m.Headline(70)
	}
	return m.Ref() + " " + m.Outcome() + ": " + m.Headline(60)
}

// ExpiresIn is how long the request still waits, in words.
func (m *Message) ExpiresIn() string {
	if m.Request == nil {
		return ""
	}
	d := m.Request.ExpiresAt.Sub(m.Now).Round(time.Minute)
	switch {
	case d <= 0:
		return "now"
	case d < 2*time.Minute:
		return "in a minute"
	}
	return "in " + strings.TrimSuffix(d.String(), "0s")
}

// shorten cuts s to at most n characters, marking the cut.
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// linkOrder is the order of the confirm links in a message.
var linkOrder = []struct{ Action, Label string }{
	{approval.LinkApprove, "Approve"},
	{approval.LinkDeny, "Deny"},
	{approval.LinkStop, "Stop session"},
}

// Button is one confirm link of a message: its label, the URL of its
// confirm page, and its action.
type Button struct {
	Label, URL, Action string
}

// Buttons returns the message's confirm links in order.
func (m *Message) Buttons() []Button {
	var out []Button
	for _, l := range linkOrder {
		if u := m.Links[l.Action]; u != "" {
			out = append(out, Button{Label: l.Label, URL: u, Action: l.Action})
		}
	}
	return out
}

//go:embed templates/*.tmpl
var templateFS embed.FS

var funcs = map[string]any{
	"visible": visible.String,
	// line is visible for a field of one line: a line break shows as \n,
	// so that an agent's field cannot add lines of its own to a message
	// (a second "Approve:" with a link of its own, say).
	"line": visible.Line,
	"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
	"indent": func(s string) string {
		return "    " + strings.ReplaceAll(visible.String(s), "\n", "\n    ")
	},
}

// The templates are parsed at start-up: a broken one fails every test.
// The templates are parsed on first use, not at package init: every role
// of the binary links this package, and the hook and the rm wrapper start
// for each call. TestTemplatesParse makes a broken template fail the tests.
var (
	htmlMail = sync.OnceValue(func() *htmltemplate.Template {
		return htmltemplate.Must(htmltemplate.New("email.html.tmpl").Funcs(funcs).ParseFS(templateFS, "templates/email.html.tmpl"))
	})
	textMail = sync.OnceValue(func() *texttemplate.Template {
		return texttemplate.Must(texttemplate.New("email.txt.tmpl").Funcs(funcs).ParseFS(templateFS, "templates/email.txt.tmpl"))
	})
	ntfyBody = sync.OnceValue(func() *texttemplate.Template {
		return texttemplate.Must(texttemplate.New("ntfy.txt.tmpl").Funcs(funcs).ParseFS(templateFS, "templates/ntfy.txt.tmpl"))
	})
)

// mailData is what the e-mail templates see.
type mailData struct {
	*Message
	TargetList []string
	More       int
}

// renderMail returns the text and HTML parts of the message's e-mail.
// html/template escapes every value for its context; the text part makes
// control characters visible, so that neither can hide what follows.
func renderMail(m *Message) (text, html string, err error) {
	d := mailData{Message: m}
	d.TargetList, d.More = m.Targets()
	for i, t := range d.TargetList {
		// A path is as long as the agent made it: one line of a message
		// shows its beginning, with a mark of the rest.
		d.TargetList[i] = limit.Text(t, maxTargetText)
	}
	var tb, hb bytes.Buffer
	if err := textMail().Execute(&tb, d); err != nil {
		return "", "", err
	}
	if err := htmlMail().Execute(&hb, d); err != nil {
		return "", "", err
	}
	return tb.String(), hb.String(), nil
}

// inboxURL is the inbox page of a request, or the inbox itself.
func inboxURL(public *url.URL, requestID string) string {
	base := strings.TrimRight(public.String(), "/") + "/approvals"
	if requestID == "" {
		return base
	}
	return base + "/" + url.PathEscape(requestID)
}

// linkURL is the confirm page of a one-time link.
func linkURL(public *url.URL, token string) string {
	return strings.TrimRight(public.String(), "/") + "/links/" + url.PathEscape(token)
}
