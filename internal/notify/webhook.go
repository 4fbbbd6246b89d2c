package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
)

// Webhook headers. The signature is "sha256=" and the hex HMAC-SHA256 of
// the raw body under the channel's secret.
const (
	SignatureHeader = "X-Countersign-Signature"
	EventHeader     = "X-Countersign-Event"
	DeliveryHeader  = "X-Countersign-Delivery"
)

// WebhookBody is the JSON a webhook posts. An n8n Webhook node takes it as
// it is: {{$json.body.request.action}}, {{$json.body.approve_url}}.
type WebhookBody struct {
	Event      string          `json:"event"`       // created, decided, expired, cancelled, test
	DeliveryID string          `json:"delivery_id"` // the same on every retry of one notification
	Timestamp  int64           `json:"timestamp"`   // Unix seconds of this attempt
	Account    string          `json:"account"`
	Channel    string          `json:"channel"`
	Request    *WebhookRequest `json:"request,omitempty"`
	InboxURL   string          `json:"inbox_url"`
	// The confirm pages of the request's one-time links, only while it
	// waits. Each opens a page with one button; GET decides nothing.
	ApproveURL string `json:"approve_url,omitempty"`
	DenyURL    string `json:"deny_url,omitempty"`
	StopURL    string `json:"stop_url,omitempty"`
}

// WebhookRequest is what a webhook tells of a request: what a human sees
// in the inbox, no credential.
type WebhookRequest struct {
	ID          string                     `json:"id"`
	Reference   string                     `json:"reference"`
	Kind        countersign.Kind           `json:"kind"`
	Action      string                     `json:"action"`
	Preview     string                     `json:"preview"`
	RiskReasons []string                   `json:"risk_reasons"`
	Targets     []string                   `json:"targets"`
	Context     countersign.RequestContext `json:"context"`
	KeyName     string                     `json:"key_name"`
	Status      countersign.Status         `json:"status"`
	CreatedAt   time.Time                  `json:"created_at"`
	ExpiresAt   time.Time                  `json:"expires_at"`
	DecidedAt   *time.Time                 `json:"decided_at,omitempty"`
	DecidedBy   string                     `json:"decided_by,omitempty"`
	Reason      string                     `json:"reason,omitempty"`
}

// webhookBody builds the body of m.
func webhookBody(m *Message) *WebhookBody {
	b := &WebhookBody{
		Event: m.Event, DeliveryID: m.DeliveryID, Timestamp: m.Now.Unix(),
		Account: m.Account, Channel: m.Channel, InboxURL: m.InboxURL,
	}
	r := m.Request
	if r == nil {
		return b
	}
	targets, _ := m.Targets()
	b.Request = &WebhookRequest{
		ID: r.ID, Reference: m.Ref(), Kind: r.Kind, Action: r.Action, Preview: r.Preview,
		RiskReasons: nonNil(r.RiskReasons), Targets: nonNil(targets), Context: r.Context, KeyName: r.KeyName,
		Status: r.Status, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt,
		DecidedBy: r.DecidedBy, Reason: r.Reason,
	}
	if !r.DecidedAt.IsZero() {
		t := r.DecidedAt
		b.Request.DecidedAt = &t
	}
	if r.Status == countersign.StatusPending {
		b.ApproveURL = m.Links[approval.LinkApprove]
		b.DenyURL = m.Links[approval.LinkDeny]
		b.StopURL = m.Links[approval.LinkStop]
	}
	return b
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Sign returns the signature header value of body under secret.
func Sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func (d *Delivery) sendWebhook(ctx context.Context, set Settings, secret string, m *Message) error {
	body, err := json.Marshal(webhookBody(m))
	if err != nil {
		return permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, set.URL, bytes.NewReader(body))
	if err != nil {
		return permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "countersign")
	req.Header.Set(EventHeader, m.Event)
	if m.DeliveryID != "" {
		req.Header.Set(DeliveryHeader, m.DeliveryID)
	}
	req.Header.Set(SignatureHeader, Sign(secret, body))
	return d.do(req, "POST webhook")
}
