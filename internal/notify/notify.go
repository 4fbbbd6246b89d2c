// Package notify tells approvers about requests: by webhook (signed JSON,
// n8n-compatible), by e-mail (SMTP, with Approve, Deny and Stop session
// buttons that open confirm pages) and by ntfy push. Notifications go
// through a durable outbox in the store: the approval service stores a new
// request's notifications in the request's own transaction, and a
// background Worker delivers them with retries and exponential backoff, so
// that neither a restart nor a receiver that is down loses one, and none
// ever blocks an agent.
//
// The Notifier decides who is told what; the Worker only delivers. Message
// bodies are rendered when they are sent, from the request as it is then.
package notify

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
)

// Notifier builds the outbox items of requests for the approval service.
// It implements approval.Notifier.
type Notifier struct {
	store countersign.Store
	keys  *keyring
}

var _ approval.Notifier = (*Notifier)(nil)

// NewNotifier returns a notifier on the store.
func NewNotifier(store countersign.Store) *Notifier {
	return &Notifier{store: store, keys: &keyring{store: store}}
}

// carriesLinks reports whether a channel's messages carry the one-time
// confirm links. ntfy messages do not: a push message is shown on a lock
// screen and kept by the ntfy server, so it only opens the inbox.
func carriesLinks(t countersign.ChannelType) bool {
	return t == countersign.ChannelEmail || t == countersign.ChannelWebhook
}

// canFollowUp reports whether a channel is told when a request is no
// longer pending: ntfy replaces its message, a webhook gets an event. An
// e-mail cannot be taken back, and a second one would only add noise.
func canFollowUp(t countersign.ChannelType) bool {
	return t == countersign.ChannelNtfy || t == countersign.ChannelWebhook
}

// Announce implements approval.Notifier: one item per channel of the
// request's account and, when any of them carries links, one set of
// one-time links (approve, deny, stop) whose tokens only the sealed
// payloads hold.
func (n *Notifier) Announce(ctx context.Context, r *countersign.Request) ([]countersign.OutboxItem, []countersign.Link, error) {
	channels, err := n.store.Channels(ctx, r.AccountID)
	if err != nil || len(channels) == 0 {
		return nil, nil, err
	}
	channels = serving(channels, r.Audience)
	var tokens map[string]string
	var links []countersign.Link
	for _, c := range channels {
		if carriesLinks(c.Type) && tokens == nil && (r.Audience == nil || !r.Audience.NoLinks) {
			tokens, links = approval.NewLinks(approval.LinkApprove, approval.LinkDeny, approval.LinkStop)
		}
	}
	items := make([]countersign.OutboxItem, 0, len(channels))
	for _, c := range channels {
		var p payload
		if carriesLinks(c.Type) && tokens != nil {
			p.Links = tokens
		}
		it, err := n.item(ctx, r, c, countersign.EventCreated, p)
		if err != nil {
			return nil, nil, err
		}
		items = append(items, it)
	}
	return items, links, nil
}

// FollowUp implements approval.Notifier: one item for each channel that can
// take a follow-up and was there when the request was made. An approval
// that expired unused was told when it was decided, and is not told again.
func (n *Notifier) FollowUp(ctx context.Context, r *countersign.Request) ([]countersign.OutboxItem, error) {
	event := followUpEvent(r)
	if event == "" {
		return nil, nil
	}
	channels, err := n.store.Channels(ctx, r.AccountID)
	if err != nil {
		return nil, err
	}
	var items []countersign.OutboxItem
	for _, c := range serving(channels, r.Audience) {
		if !canFollowUp(c.Type) || c.CreatedAt.After(r.CreatedAt) {
			continue
		}
		it, err := n.item(ctx, r, c, event, payload{})
		if err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	return items, nil
}

// followUpEvent is the event of a request that left pending, or "" for none.
func followUpEvent(r *countersign.Request) string {
	switch r.Status {
	case countersign.StatusApproved, countersign.StatusDenied, countersign.StatusResponded, countersign.StatusStopped:
		if r.DecidedBy == countersign.DecidedByAutoApprove {
			return "" // never announced: no human was asked
		}
		return countersign.EventDecided
	case countersign.StatusExpired:
		if !r.DecidedAt.IsZero() {
			return ""
		}
		return countersign.EventExpired
	case countersign.StatusCancelled:
		return countersign.EventCancelled
	}
	return ""
}

func (n *Notifier) item(ctx context.Context, r *countersign.Request, c *countersign.Channel, event string, p payload) (countersign.OutboxItem, error) {
	id := countersign.NewID("ntf_")
	sealed, err := n.keys.sealPayload(ctx, id, p)
	if err != nil {
		return countersign.OutboxItem{}, err
	}
	return countersign.OutboxItem{
		ID: id, AccountID: r.AccountID, ChannelID: c.ID, RequestID: r.ID, Event: event, Payload: sealed,
	}, nil
}

// serving keeps the channels that tell someone who may decide a request
// of audience a: every channel when a names no approvers, else only the
// channels that name an approver of a (Settings.Approvers). A channel that
// names nobody serves the whole account, and so only the requests any
// approver of it may decide.
func serving(channels []*countersign.Channel, a *countersign.Audience) []*countersign.Channel {
	if a == nil || len(a.Approvers) == 0 {
		return channels
	}
	var out []*countersign.Channel
	for _, c := range channels {
		if slices.ContainsFunc(channelApprovers(c), func(u string) bool { return slices.Contains(a.Approvers, u) }) {
			out = append(out, c)
		}
	}
	return out
}

// channelApprovers are the approvers a channel names in its settings;
// none for a channel that names nobody or whose settings do not read.
func channelApprovers(c *countersign.Channel) []string {
	var s struct {
		Approvers []string `json:"approvers"`
	}
	if json.Unmarshal(c.Config, &s) != nil {
		return nil
	}
	return s.Approvers
}
