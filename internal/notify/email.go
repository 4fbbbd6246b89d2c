package notify

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	"github.com/wneessen/go-mail"
)

// sendEmail sends m as a multipart message (text and HTML) to the
// channel's recipients. The connection is encrypted with STARTTLS, which
// must succeed, or with TLS from the first byte; the certificate is always
// checked. A password is never sent without TLS (Settings refuses it), and
// go-mail logs nothing of the session.
func (d *Delivery) sendEmail(ctx context.Context, set Settings, password string, m *Message) error {
	text, html, err := renderMail(m)
	if err != nil {
		return permanent(fmt.Errorf("render the e-mail: %w", err))
	}
	msg := mail.NewMsg()
	if err := msg.From(set.From); err != nil {
		return permanent(fmt.Errorf("from address: %w", err))
	}
	if err := msg.To(set.To...); err != nil {
		return permanent(fmt.Errorf("recipient address: %w", err))
	}
	msg.Subject(m.Subject())
	msg.SetDateWithValue(m.Now)
	msg.SetMessageID()
	// Mark the message as sent by a machine, so that no vacation
	// auto-reply answers it.
	msg.SetGenHeader("Auto-Submitted", "auto-generated")
	msg.SetGenHeader(mail.HeaderXAutoResponseSuppress, "All")
	msg.SetBodyString(mail.TypeTextPlain, text)
	msg.AddAlternativeString(mail.TypeTextHTML, html)

	client, err := mail.NewClient(set.SMTPHost, d.smtpOptions(set, password)...)
	if err != nil {
		return permanent(fmt.Errorf("SMTP client: %w", err))
	}
	if err := client.DialAndSendWithContext(ctx, msg); err != nil {
		return fmt.Errorf("send e-mail via %s:%d: %w", set.SMTPHost, set.SMTPPort, err)
	}
	return nil
}

func (d *Delivery) smtpOptions(set Settings, password string) []mail.Option {
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	opts := []mail.Option{
		mail.WithPort(set.SMTPPort),
		mail.WithTimeout(timeout),
		mail.WithTLSConfig(&tls.Config{ServerName: set.SMTPHost, RootCAs: d.RootCAs, MinVersion: tls.VersionTLS12}),
	}
	switch set.SMTPTLS {
	case TLSImplicit:
		opts = append(opts, mail.WithSSL())
	case TLSNone:
		opts = append(opts, mail.WithTLSPolicy(mail.NoTLS))
	default:
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
	}
	if set.SMTPUsername != "" {
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthAutoDiscover),
			mail.WithUsername(set.SMTPUsername), mail.WithPassword(password))
	}
	return opts
}
