package notify_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"net/mail"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/notify"
)

// mailServer is a real SMTP server (go-smtp) that requires TLS and a login
// and keeps every message it receives.
type mailServer struct {
	user, pass string
	host       string
	port       int
	roots      *x509.CertPool
	mu         sync.Mutex
	got        []receivedMail
}

type receivedMail struct {
	from string
	to   []string
	data []byte
}

// newMailServer starts an SMTP server on 127.0.0.1 with a fresh
// self-signed certificate, speaking mode: notify.TLSStartTLS, TLSImplicit
// (TLS from the first byte) or TLSNone (no STARTTLS offered).
func newMailServer(t *testing.T, mode string) *mailServer {
	t.Helper()
	cert, roots := selfSigned(t)
	m := &mailServer{user: "countersign@example.com", pass: "an smtp password", roots: roots, host: "127.0.0.1"}
	s := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &mailSession{srv: m}, nil }))
	s.Domain = "localhost"
	if mode != notify.TLSNone {
		s.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	}
	s.AllowInsecureAuth = false // a login only after TLS
	s.ReadTimeout, s.WriteTimeout = 10*time.Second, 10*time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if mode == notify.TLSImplicit {
		ln = tls.NewListener(ln, s.TLSConfig)
	}
	m.port = ln.Addr().(*net.TCPAddr).Port
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return m
}

func (m *mailServer) messages() []receivedMail {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]receivedMail(nil), m.got...)
}

type mailSession struct {
	srv    *mailServer
	authed bool
	from   string
	to     []string
}

func (s *mailSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *mailSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != s.srv.user || pass != s.srv.pass {
			return errors.New("invalid credentials")
		}
		s.authed = true
		return nil
	}), nil
}

func (s *mailSession) Mail(from string, _ *smtp.MailOptions) error {
	if !s.authed {
		return smtp.ErrAuthRequired
	}
	s.from = from
	return nil
}

func (s *mailSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}

func (s *mailSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.srv.mu.Lock()
	s.srv.got = append(s.srv.got, receivedMail{from: s.from, to: s.to, data: b})
	s.srv.mu.Unlock()
	return nil
}

func (s *mailSession) Reset()        { s.from, s.to = "", nil }
func (s *mailSession) Logout() error { return nil }

// selfSigned returns a certificate for 127.0.0.1 and a pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "countersign test SMTP"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(parsed)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

func addEmail(t *testing.T, e *env, m *mailServer, mode string) {
	t.Helper()
	e.delivery.RootCAs = m.roots
	_, err := e.admin.Add(e.ctx, notify.Spec{Account: "acme", Name: "mail", Type: countersign.ChannelEmail, Settings: notify.Settings{
		SMTPHost: m.host, SMTPPort: m.port, SMTPTLS: mode, SMTPUsername: m.user,
		From: "countersign <countersign@example.com>", To: []string{"admin@example.com", "oncall@example.com"},
	}, Secret: m.pass})
	if err != nil {
		t.Fatalf("add email channel: %v", err)
	}
}

// parsedMail is a received message with its two parts decoded.
type parsedMail struct {
	header     mail.Header
	subject    string
	text, html string
}

func parseMail(t *testing.T, data []byte) parsedMail {
	t.Helper()
	msg, err := mail.ReadMessage(strings.NewReader(string(data)))
	if err != nil {
		t.Fatalf("read message: %v", err)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		t.Fatalf("subject: %v", err)
	}
	p := parsedMail{header: msg.Header, subject: subject}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		t.Fatalf("Content-Type = %q, want multipart/alternative", msg.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		part, err := mr.NextPart() // decodes quoted-printable
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("next part: %v", err)
		}
		b, _ := io.ReadAll(part)
		b = []byte(strings.ReplaceAll(string(b), "\r\n", "\n"))
		switch ct, _, _ := mime.ParseMediaType(part.Header.Get("Content-Type")); ct {
		case "text/plain":
			p.text = string(b)
		case "text/html":
			p.html = string(b)
		default:
			t.Errorf("unexpected part %s", ct)
		}
	}
	if p.text == "" || p.html == "" {
		t.Fatalf("missing a part: text %d bytes, html %d bytes", len(p.text), len(p.html))
	}
	return p
}

// textLink returns the URL after a label in the text part.
func textLink(t *testing.T, text, label string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(label) + `:\s+(\S+)$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no %s link in the text part:\n%s", label, text)
	}
	return m[1]
}

// htmlLink returns the href of a button in the HTML part.
func htmlLink(t *testing.T, html, label string) string {
	t.Helper()
	m := regexp.MustCompile(`<a href="([^"]+)"[^>]*>` + regexp.QuoteMeta(label) + `</a>`).FindStringSubmatch(html)
	if m == nil {
		t.Fatalf("no %s button in the HTML part:\n%s", label, html)
	}
	return strings.ReplaceAll(m[1], "&amp;", "&")
}

func TestEmailSTARTTLS(t *testing.T) {
	e := newEnv(t)
	m := newMailServer(t, notify.TLSStartTLS)
	addEmail(t, e, m, notify.TLSStartTLS)
	r := e.ask("rm -rf /srv/data")
	ref := countersign.FormatReference(r.Reference)
	e.runOnce(1)

	got := m.messages()
	if len(got) != 1 {
		t.Fatalf("received %d messages, want 1", len(got))
	}
	if got[0].from != "countersign@example.com" || strings.Join(got[0].to, ",") != "admin@example.com,oncall@example.com" {
		t.Errorf("envelope from %q to %q", got[0].from, got[0].to)
	}
	p := parseMail(t, got[0].data)
	if p.subject != "Approve? "+ref+": rm -rf /srv/data" || p.header.Get("Auto-Submitted") != "auto-generated" ||
		!strings.Contains(p.header.Get("To"), "admin@example.com") || !strings.Contains(p.header.Get("From"), "countersign@example.com") {
		t.Errorf("subject %q, headers %v", p.subject, p.header)
	}
	for _, part := range []struct{ name, body string }{{"text", p.text}, {"html", p.html}} {
		for _, want := range []string{"rm -rf /srv/data", ref, "recursive deletion (-r/-R)", "protected path: /srv",
			"/srv/data/a", "prod-01", e.public.String() + "/approvals/" + r.ID, r.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC")} {
			if !strings.Contains(part.body, want) {
				t.Errorf("the %s part lacks %q", part.name, want)
			}
		}
	}
	// The target "<b>" is text in both parts, never markup.
	if !strings.Contains(p.text, "/srv/data/<b>") || !strings.Contains(p.html, "/srv/data/&lt;b&gt;") || strings.Contains(p.html, "/srv/data/<b>") {
		t.Errorf("the target /srv/data/<b> is not shown as text in both parts")
	}

	// Both parts carry the same three links.
	links := map[string]string{}
	for _, label := range []string{"Approve", "Deny", "Stop session"} {
		text, html := textLink(t, p.text, label), htmlLink(t, p.html, label)
		if text != html || !strings.HasPrefix(text, e.public.String()+"/links/") {
			t.Fatalf("%s: text link %q, HTML link %q", label, text, html)
		}
		links[label] = text
	}

	// Follow the Approve link as a mail client would: GET shows the confirm
	// page and decides nothing; the POST from the page approves, once.
	code, page := e.follow(links["Approve"])
	if code != http.StatusOK || !strings.Contains(page, "Approve "+ref+" once") || !strings.Contains(page, "rm -rf /srv/data") {
		t.Fatalf("GET approve link = %d\n%s", code, page)
	}
	if st := e.request(r.ID).Status; st != countersign.StatusPending {
		t.Fatalf("a GET decided: status %s", st)
	}
	code, page = e.press(links["Approve"], nil)
	if code != http.StatusOK || !strings.Contains(page, "Done.") {
		t.Fatalf("POST approve link = %d\n%s", code, page)
	}
	if got := e.request(r.ID); got.Status != countersign.StatusApproved || got.DecidedBy != "email link" {
		t.Fatalf("after the approve link: status %s by %q", got.Status, got.DecidedBy)
	}
	// Every other link of the request is dead now.
	if code, _ := e.press(links["Stop session"], nil); code != http.StatusConflict {
		t.Errorf("stop link after the approval = %d, want 409", code)
	}
	if code, _ := e.press(links["Approve"], nil); code != http.StatusConflict {
		t.Errorf("approve link used twice = %d, want 409", code)
	}
	// A POST from another origin is refused, whatever the token.
	if code := crossOrigin(t, links["Deny"]); code != http.StatusForbidden {
		t.Errorf("cross-origin POST = %d, want 403", code)
	}

	// E-mail takes no follow-up: a second message would only add noise.
	e.runOnce(0)
	if st := e.status("mail"); st.Sent != 1 || st.Pending != 0 {
		t.Errorf("status = %+v", st)
	}
	e.noTokens(p.text)
	if strings.Contains(e.logs.String(), m.pass) {
		t.Errorf("the SMTP password is in the log")
	}
}

func crossOrigin(t *testing.T, link string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, link, nil)
	req.Header.Set("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestEmailTLSStopSession: implicit TLS, and the Stop session link stops
// the agent's session.
func TestEmailTLSStopSession(t *testing.T) {
	e := newEnv(t)
	m := newMailServer(t, notify.TLSImplicit)
	addEmail(t, e, m, notify.TLSImplicit)
	r := e.ask("rm -rf /srv/data")
	e.runOnce(1)
	got := m.messages()
	if len(got) != 1 {
		t.Fatalf("received %d messages", len(got))
	}
	stop := textLink(t, parseMail(t, got[0].data).text, "Stop session")
	code, page := e.follow(stop)
	if code != http.StatusOK || !strings.Contains(page, "Stop the session of "+countersign.FormatReference(r.Reference)) {
		t.Fatalf("GET stop link = %d\n%s", code, page)
	}
	if code, page := e.press(stop, nil); code != http.StatusOK || !strings.Contains(page, "Done.") {
		t.Fatalf("POST stop link = %d\n%s", code, page)
	}
	if st := e.request(r.ID).Status; st != countersign.StatusStopped {
		t.Fatalf("status %s, want stopped", st)
	}
}

// TestEmailRefusals: a wrong password, a certificate nobody trusts and a
// server without STARTTLS all fail the attempt, visibly, and send nothing.
func TestEmailRefusals(t *testing.T) {
	tests := []struct {
		name   string
		change func(m *mailServer, e *env)
		want   string
	}{
		{"wrong password", func(m *mailServer, _ *env) { m.pass = "another password" }, "SMTP AUTH failed"},
		{"untrusted certificate", func(_ *mailServer, e *env) { e.delivery.RootCAs = x509.NewCertPool() }, "certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			m := newMailServer(t, notify.TLSStartTLS)
			addEmail(t, e, m, notify.TLSStartTLS)
			tt.change(m, e)
			e.ask("rm -rf /srv/data")
			e.runOnce(1)
			st := e.status("mail")
			if len(m.messages()) != 0 || st.Pending != 1 || !strings.Contains(st.LastError, tt.want) {
				t.Fatalf("received %d, status %+v; want a retry with an error containing %q", len(m.messages()), st, tt.want)
			}
			if strings.Contains(st.LastError, "an smtp password") || strings.Contains(e.logs.String(), "an smtp password") {
				t.Errorf("the password leaked into the error or the log")
			}
		})
	}
	t.Run("no STARTTLS", func(t *testing.T) {
		e := newEnv(t)
		m := newMailServer(t, notify.TLSNone) // no STARTTLS offered: the client must not go on in the clear
		addEmail(t, e, m, notify.TLSStartTLS)
		e.ask("rm -rf /srv/data")
		e.runOnce(1)
		if st := e.status("mail"); len(m.messages()) != 0 || st.Pending != 1 || !strings.Contains(st.LastError, "STARTTLS") {
			t.Fatalf("received %d, status %+v", len(m.messages()), st)
		}
	})
}

// TestEmailEscaping: whatever the agent sends is text in the HTML part,
// control characters are made visible, and the subject stays one line.
func TestEmailEscaping(t *testing.T) {
	e := newEnv(t)
	m := newMailServer(t, notify.TLSStartTLS)
	addEmail(t, e, m, notify.TLSStartTLS)
	// The service refuses these line breaks and controls now; a request
	// stored before it did is still told about, escaped.
	in := countersign.CreateInput{
		Kind: countersign.KindTool, Action: "Bash <script>alert(1)</script>\nsecond line \x1b[2J",
		RiskReasons: []string{`"><img src=x onerror=alert(1)>`, "ok\n\nApprove:      https://evil.example/links/" + strings.Repeat("a", 64)},
		Context:     countersign.RequestContext{Host: "prod-01\nExpires:    never", User: "deploy\r\nInbox: https://evil.example/"},
	}
	e.wantRefused(in)
	r := e.askOld(in)
	e.runOnce(1)
	p := parseMail(t, m.messages()[0].data)
	if strings.Contains(p.html, "<script>") || strings.Contains(p.html, "<img src=x") {
		t.Errorf("agent input became markup:\n%s", p.html)
	}
	if !strings.Contains(p.html, "&lt;script&gt;alert(1)&lt;/script&gt;") || !strings.Contains(p.html, `\x1b[2J`) {
		t.Errorf("agent input is not shown as escaped text:\n%s", p.html)
	}
	if strings.Contains(p.text, "\x1b") || !strings.Contains(p.text, `\x1b[2J`) {
		t.Errorf("the text part passes a control character through")
	}
	// A field of one line cannot add lines of its own to the text part:
	// its line breaks show as \n.
	for _, line := range strings.Split(p.text, "\n") {
		line = strings.TrimSpace(line)
		if strings.Contains(line, "evil.example") && !strings.HasPrefix(line, "- ok") && !strings.HasPrefix(line, "User:") ||
			strings.HasPrefix(line, "Expires:    never") {
			t.Errorf("an agent's field made a line of its own: %q\n%s", line, p.text)
		}
	}
	if !strings.Contains(p.text, `prod-01\nExpires:    never`) || !strings.Contains(p.text, `ok\n\nApprove:`) {
		t.Errorf("the line breaks of one-line fields are not shown as \\n:\n%s", p.text)
	}
	if want := "Approve? " + countersign.FormatReference(r.Reference) + ": Bash <script>alert(1)</script>"; p.subject != want {
		t.Errorf("subject = %q, want %q", p.subject, want)
	}
}

// TestChannelValidation: bad settings are refused before anything is
// stored.
func TestChannelValidation(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		spec notify.Spec
		want string
	}{
		{notify.Spec{Name: "h", Type: countersign.ChannelWebhook, Settings: notify.Settings{URL: "ftp://x"}, Secret: "s"}, "http or https URL"},
		{notify.Spec{Name: "h", Type: countersign.ChannelWebhook, Settings: notify.Settings{URL: "https://u:p@x/"}, Secret: "s"}, "without a user name"},
		{notify.Spec{Name: "h", Type: countersign.ChannelWebhook, Settings: notify.Settings{URL: "https://x/"}}, "needs a secret"},
		{notify.Spec{Name: "m", Type: countersign.ChannelEmail, Settings: notify.Settings{SMTPHost: "smtp.example.com", From: "a@b.c", To: []string{"x@y.z"}, SMTPTLS: "none", SMTPUsername: "u"}, Secret: "p"}, "never sent without TLS"},
		{notify.Spec{Name: "m", Type: countersign.ChannelEmail, Settings: notify.Settings{SMTPHost: "smtp.example.com", From: "a@b.c"}}, "1 to 50 recipients"},
		{notify.Spec{Name: "m", Type: countersign.ChannelEmail, Settings: notify.Settings{SMTPHost: "smtp.example.com", From: "a@b.c", To: []string{"x@y.z"}, SMTPUsername: "u"}}, "both a username and a password"},
		{notify.Spec{Name: "m", Type: countersign.ChannelEmail, Settings: notify.Settings{SMTPHost: "smtp.example.com:25", From: "a@b.c", To: []string{"x@y.z"}}}, "without a port"},
		{notify.Spec{Name: "n", Type: countersign.ChannelNtfy, Settings: notify.Settings{Topic: "a/b"}}, "topic"},
		{notify.Spec{Name: "Bad Name", Type: countersign.ChannelNtfy, Settings: notify.Settings{Topic: "t"}}, "channel name"},
		{notify.Spec{Name: "x", Type: "sms"}, "webhook, email or ntfy"},
	}
	for i, tt := range tests {
		tt.spec.Account = "acme"
		_, err := e.admin.Add(e.ctx, tt.spec)
		if countersign.ErrorCode(err) != countersign.EINVALID || !strings.Contains(countersign.ErrorMessage(err), tt.want) {
			t.Errorf("%d: Add(%+v) = %v, want EINVALID with %q", i, tt.spec, err, tt.want)
		}
	}
	if list, _ := e.admin.List(e.ctx, "acme"); len(list) != 0 {
		t.Errorf("refused channels were stored: %d", len(list))
	}
}
