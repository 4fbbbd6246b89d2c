package server

import (
	"encoding/json"
	"time"

	"github.com/countersign/countersign"
)

// requestJSON is a request as the API shows it.
type requestJSON struct {
	ID          string           `json:"id"`
	Reference   string           `json:"reference"`
	Kind        countersign.Kind `json:"kind"`
	Action      string           `json:"action"`
	Arguments   json.RawMessage  `json:"arguments"`
	ArgsHash    string           `json:"args_hash"`
	Preview     string           `json:"preview"`
	PreviewHash string           `json:"preview_hash"`
	// BindingHash is the request's binding (kind, action, args_hash,
	// preview_hash), which an approval names as the action it saw.
	BindingHash      string                     `json:"binding_hash"`
	RiskReasons      []string                   `json:"risk_reasons"`
	Tier             countersign.Tier           `json:"tier,omitempty"`
	Protected        bool                       `json:"protected"`
	Context          countersign.RequestContext `json:"context"`
	Key              string                     `json:"key"`
	Status           countersign.Status         `json:"status"`
	CreatedAt        time.Time                  `json:"created_at"`
	ExpiresAt        time.Time                  `json:"expires_at"`
	DecidedAt        *time.Time                 `json:"decided_at"`
	DecidedBy        string                     `json:"decided_by,omitempty"`
	Text             string                     `json:"text,omitempty"`
	AutoApproved     bool                       `json:"auto_approved"`
	AutoApproveUntil *time.Time                 `json:"auto_approve_until,omitempty"`
	ConsumedAt       *time.Time                 `json:"consumed_at,omitempty"`
	Scope            *countersign.Scope         `json:"scope,omitempty"`
	Ran              *ranJSON                   `json:"ran,omitempty"`
	// Edited and Original say that an approver changed the action before
	// approving it: the fields above are the edited action, what the
	// agent is to run, and Original the action as the agent asked.
	Edited   bool          `json:"edited,omitempty"`
	Original *originalJSON `json:"original,omitempty"`
	InboxURL string        `json:"inbox_url"`
}

// originalJSON is the action as the agent asked for it, on a request an
// approver edited.
type originalJSON struct {
	Arguments   json.RawMessage `json:"arguments"`
	ArgsHash    string          `json:"args_hash"`
	Preview     string          `json:"preview"`
	PreviewHash string          `json:"preview_hash"`
	RiskReasons []string        `json:"risk_reasons"`
}

// originalOf is the original field of a request; nil when not edited.
func originalOf(r *countersign.Request) *originalJSON {
	o := r.Original
	if o == nil {
		return nil
	}
	args, reasons := o.Arguments, o.RiskReasons
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if reasons == nil {
		reasons = []string{}
	}
	return &originalJSON{Arguments: args, ArgsHash: o.ArgsHash, Preview: o.Preview, PreviewHash: o.PreviewHash, RiskReasons: reasons}
}

// ranJSON is what the agent reported it ran under the approval: the tool,
// the hash of its arguments in the request's binding, and whether both
// are the approved ones.
type ranJSON struct {
	ReportedAt time.Time `json:"reported_at"`
	Action     string    `json:"action"`
	ArgsHash   string    `json:"args_hash"`
	AsApproved bool      `json:"as_approved"`
}

// ranOf is the ran field of a request; nil before a report.
func ranOf(r *countersign.Request) *ranJSON {
	if !r.Ran.Reported() {
		return nil
	}
	return &ranJSON{ReportedAt: r.Ran.At, Action: r.Ran.Action, ArgsHash: r.Ran.ArgsHash, AsApproved: !r.RanOther()}
}

func (s *Server) requestJSON(r *countersign.Request) requestJSON {
	reasons := r.RiskReasons
	if reasons == nil {
		reasons = []string{}
	}
	args := r.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	return requestJSON{
		ID: r.ID, Reference: countersign.FormatReference(r.Reference), Kind: r.Kind, Action: r.Action,
		Arguments: args, ArgsHash: r.ArgsHash, Preview: r.Preview, PreviewHash: r.PreviewHash, BindingHash: r.BindingHash(),
		RiskReasons: reasons, Tier: r.Tier, Protected: r.Protected, Context: r.Context, Key: r.KeyName, Status: r.Status,
		CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, DecidedAt: timePtr(r.DecidedAt),
		DecidedBy: r.DecidedBy, Text: r.Reason, AutoApproved: r.DecidedBy == countersign.DecidedByAutoApprove,
		AutoApproveUntil: timePtr(r.AutoApproveUntil), ConsumedAt: timePtr(r.ConsumedAt),
		Scope: r.Scope, Ran: ranOf(r), Edited: r.Original != nil, Original: originalOf(r), InboxURL: s.inboxURL(r.ID),
	}
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
