// Package confirm is the confirmation of countersign's MCP gateway: on top
// of the mirror (package gateway), it lets a call of a tool whose tier
// needs a human go on only once a human approved exactly that call: the
// same principal, tool, arguments and preview, once, within ten minutes.
//
// How the human is asked depends on what the client declared, per call:
//
//   - a 2026-07-28 client that can elicit gets an input_required result
//     with an elicitation and a sealed requestState;
//   - a client of 2025-11-25 or older that can elicit gets the same through
//     the SDK's legacy middleware, which sends elicitation/create;
//   - with URL elicitation, the elicitation is the inbox page of the
//     request (the browser proves the account; the URL is no capability);
//   - every other client gets a tool result "approval_pending" naming the
//     inbox URL, the reference and the expiry, and the model's retry of the
//     same call takes the approval.
//
// Where a countersign server is involved (the /mcp endpoint of countersign
// serve, or `countersign mcp` with COUNTERSIGN_URL), the decision is an
// approver's, in the inbox or any channel of the server; an elicitation
// shows the trusted preview and the way to the inbox, and holds the call
// while the human decides. By default an agent key never decides, so no
// MCP client answer approves anything there; countersign serve lets the
// operator mark keys whose client a person answers (elicitation_decides):
// their Accept approves the one call, unless it needs a passkey. Standalone
// (`countersign mcp` with no server) there is no approver: the user's
// answer to the elicitation is the decision, or ADR 0003's local page on
// 127.0.0.1 for clients without it.
package confirm

import (
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/gateway"
)

// Confirmation asks a human about the calls the mirror hands it
// (gateway.Confirmer), and runs each once approved.
type Confirmation struct {
	approvals approvals
	states    *stateCodec
	cfg       *gateway.Config
	log       *slog.Logger
	now       func() time.Time
	recent    recentAsks
	holding   holds
}

// maxQuietHold is the longest hold that still ends, with the round trips
// around it, before the 60 s request timeout of common MCP clients.
const maxQuietHold = 55 * time.Second

// newConfirmation returns the confirmation of cfg's gateway: approvals go
// to a, and request states are sealed under stateKey.
func newConfirmation(cfg *gateway.Config, a approvals, stateKey []byte, log *slog.Logger) (*Confirmation, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	states, err := newStateCodec(stateKey)
	if err != nil {
		return nil, err
	}
	if cfg.Hold > maxQuietHold {
		log.Warn("the MCP hold is longer than the 60 s request timeout of common MCP clients (the TypeScript SDK's, Claude Code's): "+
			"their calls may time out while a human decides, unless they reset the timeout on progress; a hold of 45 s is safe",
			"hold", cfg.Hold.String())
	}
	clock := cfg.Clock
	if clock == nil {
		clock = countersign.SystemClock{}
	}
	return &Confirmation{approvals: a, states: states, cfg: cfg, log: log, now: clock.Now,
		recent: recentAsks{m: map[string]recentAsk{}}}, nil
}

// build returns the gateway of cfg with a confirmation that asks a.
func build(cfg *gateway.Config, a approvals, stateKey []byte, o gateway.Options) (*gateway.Gateway, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	f, err := newConfirmation(cfg, a, stateKey, o.Log)
	if err != nil {
		return nil, err
	}
	return gateway.New(cfg, f, o)
}

// NewForServer returns the gateway of countersign serve: approvals go to
// the service in process, the inbox is under publicURL, and request states
// are sealed under stateKey (a server key every replica shares).
func NewForServer(cfg *gateway.Config, svc *approval.Service, publicURL *url.URL, stateKey []byte, log *slog.Logger) (*gateway.Gateway, error) {
	if len(stateKey) < 32 {
		return nil, fmt.Errorf("the MCP request state key must have 32 bytes")
	}
	elicits := func(p gateway.Principal) bool { return cfg.PolicyFor(p).ElicitationDecides }
	return build(cfg, &serviceApprovals{svc: svc, inbox: publicURL, elicits: elicits}, stateKey, gateway.Options{Log: log})
}
