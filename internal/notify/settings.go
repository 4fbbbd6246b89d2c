package notify

import (
	"encoding/json"
	"fmt"
	"net/mail"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/countersign/countersign"
)

// TLS modes of an e-mail channel.
const (
	TLSStartTLS = "starttls" // plain connection upgraded with STARTTLS, which must succeed (port 587)
	TLSImplicit = "tls"      // TLS from the first byte (port 465)
	TLSNone     = "none"     // no encryption: a relay on the same host only, never with a password
)

// DefaultNtfyServer is the ntfy server of a channel that names none.
const DefaultNtfyServer = "https://ntfy.sh"

// Settings are a channel's settings, stored as its Config. Which fields
// count depends on the type; none is a secret.
type Settings struct {
	// webhook
	URL string `json:"url,omitempty" toml:"url"`

	// email
	SMTPHost     string   `json:"smtp_host,omitempty" toml:"smtp_host"`
	SMTPPort     int      `json:"smtp_port,omitempty" toml:"smtp_port"`
	SMTPTLS      string   `json:"smtp_tls,omitempty" toml:"smtp_tls"`
	SMTPUsername string   `json:"smtp_username,omitempty" toml:"smtp_username"`
	From         string   `json:"from,omitempty" toml:"from"`
	To           []string `json:"to,omitempty" toml:"to"`

	// ntfy
	Server string `json:"server,omitempty" toml:"server"`
	Topic  string `json:"topic,omitempty" toml:"topic"`

	// Approvers, of any type, are the usernames the channel tells: a
	// request a team rule routes to approvers is announced only on the
	// channels that name one of them. A channel that names nobody tells
	// the whole account, and so only of the requests no rule routes.
	Approvers []string `json:"approvers,omitempty" toml:"approvers"`
}

// topicPattern is what ntfy accepts as a topic name.
var topicPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[-_A-Za-z0-9]{1,64}$`) }) // compiled on first use: every role starts with this package

// normalize checks the settings of a channel of type t with its secret and
// fills in defaults. It keeps only the fields of the type.
func (s Settings) normalize(t countersign.ChannelType, secret string) (Settings, error) {
	switch t {
	case countersign.ChannelWebhook:
		u, err := httpURL("url", s.URL)
		if err != nil {
			return Settings{}, err
		}
		if secret == "" {
			return Settings{}, countersign.Errorf(countersign.EINVALID, "a webhook needs a secret to sign its bodies with")
		}
		return Settings{URL: u}, nil
	case countersign.ChannelEmail:
		return s.normalizeEmail(secret)
	case countersign.ChannelNtfy:
		if s.Server == "" {
			s.Server = DefaultNtfyServer
		}
		server, err := httpURL("server", s.Server)
		if err != nil {
			return Settings{}, err
		}
		if !topicPattern().MatchString(s.Topic) {
			return Settings{}, countersign.Errorf(countersign.EINVALID, "the ntfy topic must be 1 to 64 letters, digits, '-' and '_'")
		}
		return Settings{Server: strings.TrimRight(server, "/"), Topic: s.Topic}, nil
	}
	return Settings{}, countersign.Errorf(countersign.EINVALID, "the channel type must be webhook, email or ntfy")
}

func (s Settings) normalizeEmail(password string) (Settings, error) {
	out := Settings{SMTPHost: strings.TrimSpace(s.SMTPHost), SMTPPort: s.SMTPPort, SMTPTLS: s.SMTPTLS, SMTPUsername: s.SMTPUsername}
	if out.SMTPHost == "" || strings.ContainsAny(out.SMTPHost, "/ :") {
		return Settings{}, countersign.Errorf(countersign.EINVALID, "an e-mail channel needs the SMTP server's host name (without a port)")
	}
	if out.SMTPTLS == "" {
		out.SMTPTLS = TLSStartTLS
	}
	ports := map[string]int{TLSStartTLS: 587, TLSImplicit: 465, TLSNone: 25}
	def, ok := ports[out.SMTPTLS]
	if !ok {
		return Settings{}, countersign.Errorf(countersign.EINVALID, "smtp_tls must be starttls, tls or none")
	}
	if out.SMTPPort == 0 {
		out.SMTPPort = def
	}
	if out.SMTPPort < 1 || out.SMTPPort > 65535 {
		return Settings{}, countersign.Errorf(countersign.EINVALID, "the SMTP port must be from 1 to 65535")
	}
	if (out.SMTPUsername == "") != (password == "") {
		return Settings{}, countersign.Errorf(countersign.EINVALID, "SMTP authentication needs both a username and a password")
	}
	if out.SMTPTLS == TLSNone && password != "" {
		return Settings{}, countersign.Errorf(countersign.EINVALID, "an SMTP password is never sent without TLS; use starttls or tls")
	}
	from, err := mail.ParseAddress(s.From)
	if err != nil {
		return Settings{}, countersign.Errorf(countersign.EINVALID, "from must be an e-mail address, such as countersign@example.com")
	}
	out.From = from.String()
	if len(s.To) == 0 || len(s.To) > 50 {
		return Settings{}, countersign.Errorf(countersign.EINVALID, "an e-mail channel needs 1 to 50 recipients")
	}
	for _, to := range s.To {
		a, err := mail.ParseAddress(to)
		if err != nil {
			return Settings{}, countersign.Errorf(countersign.EINVALID, "recipient %q is not an e-mail address", to)
		}
		out.To = append(out.To, a.Address)
	}
	return out, nil
}

// httpURL checks an http or https URL without credentials in it.
func httpURL(name, v string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(v))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
		return "", countersign.Errorf(countersign.EINVALID, "%s must be an http or https URL without a user name or password in it", name)
	}
	return u.String(), nil
}

// decodeSettings reads a stored channel's settings.
func decodeSettings(c *countersign.Channel) (Settings, error) {
	var s Settings
	if err := json.Unmarshal(c.Config, &s); err != nil {
		return s, fmt.Errorf("decode the settings of channel %s: %w", c.Name, err)
	}
	return s, nil
}

// Describe is a one-line summary of a channel's settings, fit to print: it
// holds no secret, and of a webhook URL only its origin, since the path of
// a webhook is often a secret of its own.
func Describe(c *countersign.Channel) string {
	s, err := decodeSettings(c)
	if err != nil {
		return "unreadable settings"
	}
	switch c.Type {
	case countersign.ChannelWebhook:
		if u, err := url.Parse(s.URL); err == nil {
			return "POST " + u.Scheme + "://" + u.Host + "/…"
		}
	case countersign.ChannelEmail:
		return fmt.Sprintf("%s via %s:%d (%s) to %s", s.From, s.SMTPHost, s.SMTPPort, s.SMTPTLS, strings.Join(s.To, ", "))
	case countersign.ChannelNtfy:
		return s.Server + "/" + s.Topic
	}
	return ""
}
