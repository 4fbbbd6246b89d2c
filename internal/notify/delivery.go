package notify

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/countersign/countersign"
)

// Delivery sends messages through channels: one sender per channel type,
// and the public URL that links point to.
type Delivery struct {
	// PublicURL is where people reach the server; inbox and confirm links
	// are built on it.
	PublicURL *url.URL
	// HTTPClient sends webhooks and ntfy messages; nil: a client with a
	// 15-second timeout that follows no redirect.
	HTTPClient *http.Client
	// RootCAs are the roots an SMTP server's certificate is checked
	// against; nil: the system's.
	RootCAs *x509.CertPool
	// Timeout bounds one SMTP session (default 30 s).
	Timeout time.Duration
}

// permanentError is a failure that no retry can mend: the item is given up
// at once.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

func permanent(err error) error { return permanentError{err} }

func isPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// Send renders m for the channel and sends it. secret is the channel's
// opened secret.
func (d *Delivery) Send(ctx context.Context, c *countersign.Channel, secret string, m *Message) error {
	set, err := decodeSettings(c)
	if err != nil {
		return permanent(err)
	}
	switch c.Type {
	case countersign.ChannelWebhook:
		return d.sendWebhook(ctx, set, secret, m)
	case countersign.ChannelEmail:
		return d.sendEmail(ctx, set, secret, m)
	case countersign.ChannelNtfy:
		return d.sendNtfy(ctx, set, secret, m)
	}
	return permanent(fmt.Errorf("unknown channel type %q", c.Type))
}

func (d *Delivery) httpClient() *http.Client {
	if d.HTTPClient != nil {
		return d.HTTPClient
	}
	return &http.Client{
		Timeout: 15 * time.Second,
		// A redirect is an answer, not a delivery: following it could send
		// the links to a host nobody configured.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// do sends an HTTP request and turns anything but a 2xx answer into an
// error. The error names neither the URL (a webhook's path is often a
// secret) nor the answer's body (a receiver could echo the links back).
func (d *Delivery) do(req *http.Request, what string) error {
	resp, err := d.httpClient().Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// The code and its standard text only: the reason phrase is the
		// receiver's own words, which could echo a link back.
		text := http.StatusText(resp.StatusCode)
		if text == "" {
			text = "(a status of its own)"
		}
		return fmt.Errorf("%s: the receiver answered %d %s", what, resp.StatusCode, text)
	}
	return nil
}

// testMessage is the message of `countersign notify test`.
func (d *Delivery) testMessage(account, channel string, now time.Time) *Message {
	return &Message{Event: EventTest, Account: account, Channel: channel, InboxURL: inboxURL(d.publicURL(), ""), Now: now}
}

func (d *Delivery) publicURL() *url.URL {
	if d.PublicURL == nil {
		return &url.URL{Scheme: "http", Host: "127.0.0.1:8080"}
	}
	return d.PublicURL
}
