// Package approval holds the lifecycle rules of requests: create with a
// binding, decide (the first decision wins), consume once, cancel, expire,
// auto-approve windows and the per-account limit. It is the only package
// that changes a request's state; every route, page and client role goes
// through it. Who may act, and how they prove it, is internal/identity's:
// a decision arrives here with its approver already known, and a step-up
// with its proof (countersign.Verification).
package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/limit"
	"github.com/countersign/countersign/internal/metrics"
	"github.com/countersign/countersign/internal/visible"
)

// Config holds the limits of the lifecycle.
type Config struct {
	// TTL is how long a request waits for a decision (default 10 minutes).
	TTL time.Duration
	// MaxTTL bounds a TTL an agent asks for (default 1 hour).
	MaxTTL time.Duration
	// ConsumeGrace is the least time an approved request stays usable after
	// the approval, so that a decision in the last second can still be
	// used (default 1 minute).
	ConsumeGrace time.Duration
	// MaxPending is how many requests an account may have waiting at once
	// (default 5).
	MaxPending int
	// SweepInterval is how often expired requests are swept (default 5 s).
	SweepInterval time.Duration
	// StepUp names the approvals that need a fresh passkey assertion (see
	// StepUpPolicy); the zero policy asks for none.
	StepUp StepUpPolicy
	// Teams routes requests to approvers and gives some a quorum; nil:
	// every approver of an account decides its requests, the first
	// decision wins.
	Teams *Teams
	// SharedTeams, on a store that replicas share, holds the fingerprint
	// of the teams configuration the replicas decide under (the last one
	// started wrote its own): every decision of a human, and every
	// approval by a window or a hook approval, is refused unless it is
	// Teams' (see checkTeams). nil: the server is the store's only one.
	SharedTeams countersign.TeamsFingerprints
	// Notifier, when set, builds the notifications of new requests and of
	// their decisions and expiry; nil: none.
	Notifier Notifier
}

func (c *Config) setDefaults() {
	if c.TTL <= 0 {
		c.TTL = 10 * time.Minute
	}
	if c.MaxTTL <= 0 {
		c.MaxTTL = time.Hour
	}
	if c.MaxTTL < c.TTL {
		c.MaxTTL = c.TTL
	}
	if c.ConsumeGrace <= 0 {
		c.ConsumeGrace = time.Minute
	}
	if c.MaxPending <= 0 {
		c.MaxPending = 5
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = 5 * time.Second
	}
}

// Service is the approval lifecycle on a Store: the only thing that
// changes a request's state. Every route, page, CLI and gateway calls it.
type Service struct {
	store   countersign.Store
	clock   countersign.Clock
	hub     *Hub
	cfg     Config
	log     *slog.Logger
	metrics *Metrics
	// teamsFP is cfg.Teams.Fingerprint().
	teamsFP string
}

// New returns a service on the store. A nil clock is the system clock; a nil
// logger discards.
func New(store countersign.Store, clock countersign.Clock, hub *Hub, cfg Config, log *slog.Logger, m *Metrics) *Service {
	cfg.setDefaults()
	if clock == nil {
		clock = countersign.SystemClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = NewMetrics(metrics.NewRegistry(), hub)
	}
	return &Service{store: store, clock: clock, hub: hub, cfg: cfg, log: log, metrics: m, teamsFP: cfg.Teams.Fingerprint()}
}

// Config returns the service's limits after defaults.
func (s *Service) Config() Config { return s.cfg }

// Hub returns the hub the service rings.
func (s *Service) Hub() *Hub { return s.hub }

// Limits of what one request may carry, so that a request stays readable on
// a phone and one agent cannot fill the store.
const (
	maxAction      = 4096
	maxPreview     = MaxPreview
	maxArguments   = 32 << 10
	maxRiskReasons = 50
	maxRiskReason  = 500
	maxContext     = 1024
	maxText        = 4000
)

// MaxPreview is the most bytes a request's preview may hold. A preview the
// service or a route builds from an agent's input is cut to it, with a
// visible mark.
const MaxPreview = 16 << 10

// MaxArgumentsText is the most bytes of a request's ArgumentsText.
const MaxArgumentsText = 16 << 10

// Create asks for a human's decision. An identical live request of the same
// key (same binding) is returned instead of a new one, with created false.
// Errors: EINVALID, ELIMIT.
func (s *Service) Create(ctx context.Context, agent countersign.Agent, in countersign.CreateInput) (*countersign.Request, bool, error) {
	r, err := s.newRequest(agent, in)
	if err != nil {
		return nil, false, err
	}
	ev := countersign.AuditEvent{Event: "created", Actor: "key:" + agent.KeyID}
	extra := map[string]string{}
	// Only its votes approve a request a team rule gives a quorum: no
	// window or hook approval that one approver gave (perhaps before the
	// rule existed) stands in for them. One a rule routes is approved by
	// a window or hook approval only when an approver it is routed to
	// gave that.
	// On a replica whose teams configuration is not the other replicas',
	// nothing approves a request as it is made: it waits for a decision,
	// which a replica of the right configuration takes.
	rule := s.cfg.Teams.Rule(r)
	if err := s.checkTeams(ctx); err != nil {
		s.log.Warn("no window or hook approval applied: the teams configuration is not the other replicas'", "request", r.ID, "err", err)
	} else if rule == nil || !rule.Votes() {
		covered, err := s.applyCoverage(ctx, r, in.CoveredBy, rule, &ev, extra)
		if err != nil {
			return nil, false, err
		}
		if !covered {
			if err := s.applyWindow(ctx, r, rule, &ev, extra); err != nil {
				return nil, false, err
			}
		}
	}
	s.announce(ctx, r)
	for range 8 {
		r.Reference = countersign.NewReference()
		ev.Detail = bindingDetail(r, extra)
		got, created, err := s.store.CreateRequest(ctx, r, s.cfg.MaxPending, r.CreatedAt, ev)
		if errors.Is(err, countersign.ErrReferenceTaken) {
			continue // the reference is taken by a live request: draw again
		} else if err != nil {
			return nil, false, err
		}
		if created {
			s.hub.Notify(AccountTopic(got.AccountID))
			s.metrics.entered(got)
			s.log.Info("request created", "request", got.ID, "reference", got.Reference, "kind", got.Kind, "account", got.AccountID, "key", got.KeyID, "status", got.Status)
		}
		return got, created, nil
	}
	return nil, false, fmt.Errorf("create request: no free reference code after 8 draws")
}

// newRequest validates the input and builds the request with its binding.
func (s *Service) newRequest(agent countersign.Agent, in countersign.CreateInput) (*countersign.Request, error) {
	if in.Kind == "" {
		in.Kind = countersign.KindGeneric
	}
	if !in.Kind.Valid() {
		return nil, countersign.Errorf(countersign.EINVALID, "kind must be one of rm, tool, mcp, generic")
	}
	if err := humanText("action", in.Action, maxAction, true, false); err != nil {
		return nil, err
	}
	if err := checkFacts(in); err != nil {
		return nil, err
	}
	if len(in.Arguments) > maxArguments {
		return nil, countersign.Errorf(countersign.EINVALID, "arguments must be at most %d bytes of JSON", maxArguments)
	}
	b, err := Bind(in.Action, in.Arguments, in.Preview)
	if err != nil {
		return nil, argumentsError(err)
	}
	args := b.Args
	if err := humanText("preview", b.Preview, maxPreview, true, true); err != nil {
		return nil, err
	}
	if len(in.RiskReasons) > maxRiskReasons {
		return nil, countersign.Errorf(countersign.EINVALID, "at most %d risk reasons", maxRiskReasons)
	}
	for _, reason := range in.RiskReasons {
		if err := humanText("each risk reason", reason, maxRiskReason, true, false); err != nil {
			return nil, err
		}
	}
	c := in.Context
	for name, v := range map[string]string{"context.user": c.User, "context.host": c.Host, "context.cwd": c.Cwd, "context.session_id": c.SessionID} {
		if err := humanText(name, v, maxContext, false, false); err != nil {
			return nil, err
		}
	}
	if err := humanText("context.call_id", c.CallID, maxCallID, false, false); err != nil {
		return nil, err
	}
	if err := countersign.CheckAgent(c); err != nil {
		return nil, err
	}
	c.SessionID = countersign.AgentSession(c.Agent, c.SessionID)
	ttl := in.TTL
	if ttl == 0 {
		ttl = s.cfg.TTL
	} else if ttl < 10*time.Second || ttl > s.cfg.MaxTTL {
		return nil, countersign.Errorf(countersign.EINVALID, "ttl must be between 10 seconds and %s", s.cfg.MaxTTL)
	}
	scope, err := scopeOf(in.Kind, in.Action, args, in.RiskReasons, in.Scope)
	if err != nil {
		return nil, err
	}
	if err := humanText("covered_by", in.CoveredBy, 100, false, false); err != nil {
		return nil, err
	}
	if err := humanText("seed id", in.SeedID, 200, false, false); err != nil {
		return nil, err
	}
	if in.CoveredBy != "" && in.Kind != countersign.KindRm {
		return nil, countersign.Errorf(countersign.EINVALID, "covered_by goes only with kind rm")
	}
	now := s.clock.Now()
	r := &countersign.Request{
		Scope:       scope,
		ID:          countersign.NewOrderedID("req_"),
		AccountID:   agent.AccountID,
		KeyID:       agent.KeyID,
		KeyName:     agent.KeyName,
		Kind:        in.Kind,
		Action:      in.Action,
		Arguments:   args,
		ArgsHash:    b.ArgsHash,
		Preview:     b.Preview,
		PreviewHash: b.PreviewHash,
		RiskReasons: append([]string{}, in.RiskReasons...),
		Tier:        in.Tier,
		Protected:   in.Protected || protectedByReason(in.RiskReasons),
		Context:     c,
		Status:      countersign.StatusPending,
		CreatedAt:   now,
		ExpiresAt:   now.Add(ttl),
		Seed:        in.Seed,
		SeedID:      in.SeedID,
		Links:       in.Links,
	}
	// Rendered here, once: pages show this text and never render the
	// arguments again.
	r.ArgumentsText = ArgumentsText(args)
	return r, nil
}

// applyWindow approves the request at once when an auto-approve window of
// the same key, session, kind and action is open and covers the request's
// shape (see covers). The audit entry names the window.
func (s *Service) applyWindow(ctx context.Context, r *countersign.Request, rule *TeamRule, ev *countersign.AuditEvent, extra map[string]string) error {
	if r.Context.SessionID == "" {
		return nil
	}
	list, err := s.store.ActiveWindows(ctx, r.KeyID, r.Context.SessionID, r.Kind, WindowAction(r.Kind, r.Action), r.CreatedAt)
	if err != nil {
		return err
	}
	var w *countersign.AutoApproveWindow
	for _, x := range list {
		if !covers(x, r) {
			continue
		}
		if ok, err := s.openedByRouted(ctx, x, rule); err != nil {
			return err
		} else if ok {
			w = x
			break
		}
	}
	if w == nil {
		return nil
	}
	r.Status = countersign.StatusApproved
	r.DecidedAt = r.CreatedAt
	r.DecidedBy = countersign.DecidedByAutoApprove
	r.AutoApproveUntil = w.Until
	// An approval the window gave is usable while the window is open (and
	// at least ConsumeGrace), not for the request's own, longer life: the
	// human approved a time span, not approvals to keep for later.
	usable := w.Until
	if grace := r.CreatedAt.Add(s.cfg.ConsumeGrace); grace.After(usable) {
		usable = grace
	}
	if usable.Before(r.ExpiresAt) {
		r.ExpiresAt = usable
	}
	ev.Event = "auto_approved"
	extra["window"], extra["window_opened_by"] = w.ID, w.RequestID
	return nil
}

// WindowAction is the action an auto-approve window is scoped to: the tool
// for tool, mcp and generic requests; any delete for rm requests, whose
// action is the whole command line.
func WindowAction(kind countersign.Kind, action string) string {
	if kind == countersign.KindRm {
		return ""
	}
	return action
}

// DefaultPreview is the preview of a request that came without one: the
// action and its arguments, indented, cut to MaxPreview with a visible
// mark. The canonical text itself is indented, so that numbers and strings
// read exactly as sent and no < or & turns into a \u escape; building it
// costs the size of the arguments, however deep they nest. Characters
// that would hide or reorder text, which canonical JSON keeps in strings,
// are written as escapes (visible.String).
func DefaultPreview(action string, canonicalArgs json.RawMessage) string {
	if string(canonicalArgs) == "{}" {
		return action
	}
	if len(action)+1+64 > MaxPreview {
		return limit.Text(action, MaxPreview) // refused for its action anyway
	}
	return limit.Text(visible.String(action+"\n"+limit.IndentJSON(canonicalArgs, MaxPreview-len(action)-1)), MaxPreview)
}

// ArgumentsText is the arguments as pages show them: the canonical JSON
// indented, cut to MaxArgumentsText with a visible mark; empty for no
// arguments.
func ArgumentsText(canonicalArgs json.RawMessage) string {
	if len(canonicalArgs) == 0 || string(canonicalArgs) == "{}" {
		return ""
	}
	return limit.IndentJSON(canonicalArgs, MaxArgumentsText)
}

func validText(name, v string, max int, required bool) error {
	switch {
	case required && strings.TrimSpace(v) == "":
		return countersign.Errorf(countersign.EINVALID, "%s is required", name)
	case len(v) > max:
		return countersign.Errorf(countersign.EINVALID, "%s must be at most %d bytes", name, max)
	case !utf8.ValidString(v):
		return countersign.Errorf(countersign.EINVALID, "%s must be UTF-8", name)
	case strings.ContainsRune(v, 0):
		// PostgreSQL cannot store it, and a store copied there would fail
		// on it; other control characters are shown visibly wherever a
		// human reads them.
		return countersign.Errorf(countersign.EINVALID, "%s must not contain NUL", name)
	}
	return nil
}

// humanText checks a text of a request that a human reads, as validText
// does, and refuses control and format characters in it
// (visible.FindControl), but for the line breaks and tabs of a text of
// several lines (lines). Escaped on every surface, they would still reach
// the rules and the stored record as something other than what the human
// reads; refused, what is stored is what is shown. Every caller goes
// through here, the gateway in process too.
func humanText(name, v string, max int, required, lines bool) error {
	if err := validText(name, v, max, required); err != nil {
		return err
	}
	if i, r := visible.FindControl(v, lines); i >= 0 {
		allowed := ""
		if lines {
			allowed = " other than line breaks and tabs"
		}
		return countersign.Errorf(countersign.EINVALID, "%s must not contain control or format characters%s (it holds %U at byte %d); send such characters escaped, as text",
			name, allowed, r, i)
	}
	return nil
}

// protectedByReason reports whether a risk reason says that a delete
// touches a protected path, as the seed's client and rm wrappers and
// hooks older than the protected field say it. It can only add the fact,
// never take it away: a client that leaves the reason out still sends
// the field, and a reason is never what lets an approval through.
func protectedByReason(reasons []string) bool {
	for _, r := range reasons {
		if strings.HasPrefix(r, "protected path:") {
			return true
		}
	}
	return false
}

// checkFacts checks the typed facts of a new request: a known tier, and
// only on an MCP request. A risk reason that names a tier must name the
// request's own: step-up reads the tier field, and a human who reads
// "tier: commit" must be deciding a request of that tier, not one whose
// agent wrote the reason over a lower field.
func checkFacts(in countersign.CreateInput) error {
	switch {
	case in.Tier != "" && !in.Tier.Valid():
		return countersign.Errorf(countersign.EINVALID, "tier must be one of read, write, commit, external")
	case in.Tier != "" && in.Kind != countersign.KindMCP:
		return countersign.Errorf(countersign.EINVALID, "tier goes only with kind mcp")
	}
	for _, r := range in.RiskReasons {
		if !strings.HasPrefix(r, "tier:") || in.Tier != "" && r == TierReason(in.Tier) {
			continue
		}
		if in.Tier == "" {
			return countersign.Errorf(countersign.EINVALID, "each risk reason that names a tier needs the request's tier field; %q has none", r)
		}
		return countersign.Errorf(countersign.EINVALID, "each risk reason that names a tier must name the request's own tier (%q), not %q", TierReason(in.Tier), r)
	}
	return nil
}

// bindingDetail is the audit detail of a new request: its binding, and
// what approved it at once (extra).
func bindingDetail(r *countersign.Request, extra map[string]string) string {
	d := map[string]string{
		"kind": string(r.Kind), "action": r.Action, "args_hash": r.ArgsHash,
		"preview_hash": r.PreviewHash, "reference": r.Reference, "session_id": r.Context.SessionID,
	}
	for k, v := range extra {
		d[k] = v
	}
	b, _ := json.Marshal(d)
	return string(b)
}
