package approval

import (
	"fmt"
	"slices"
	"strings"

	"github.com/countersign/countersign"
)

// StepUpRule names requests whose approval needs a fresh passkey
// assertion. Every field set must match; an empty field matches anything.
// A rule matches typed facts of the request, which the server stores as
// its fields, never the wording of its risk reasons, which are written
// for humans and which an agent chooses.
type StepUpRule struct {
	Kind countersign.Kind
	// Tier is an MCP call's tier (Request.Tier). An MCP request whose
	// tier is unknown (stored before tiers were kept) matches every tier:
	// it fails closed.
	Tier countersign.Tier
	// Tool is a glob over the action (the tool or command); * matches any
	// run of characters.
	Tool string
	// Protected, when set, matches only requests that touch a protected
	// path (Request.Protected).
	Protected bool
}

// StepUpPolicy says which approvals need a passkey: those of requests a
// rule matches, and, with Windows, every approval that opens an
// auto-approve window.
type StepUpPolicy struct {
	Rules   []StepUpRule
	Windows bool
}

// DefaultStepUp is the policy when the operator names none: MCP commit and
// external tiers, deletes of protected paths, and every auto-approve
// window.
var DefaultStepUp = StepUpPolicy{
	Rules: []StepUpRule{
		{Kind: countersign.KindMCP, Tier: countersign.TierCommit},
		{Kind: countersign.KindMCP, Tier: countersign.TierExternal},
		// A delete of a protected path, by the rm wrapper (kind rm) or
		// the Claude Code hook (kind tool): both say so.
		{Protected: true},
	},
	Windows: true,
}

// legacyProtectedReason is the reason glob that rules written before
// rules matched typed facts used for deletes of protected paths: it reads
// as protected=true.
var legacyProtectedReason = []string{"protected path: *", "protected path:*"}

// ParseStepUp reads a policy: rules separated by ";", each a list of
// field=value separated by ",", with the fields kind, tier, tool and
// protected (only "true"); the rule "window" stands for every
// auto-approve window; "none" is the empty policy and "default"
// DefaultStepUp. The field reason of older policies is read only as
// "reason=protected path: *", which is protected=true: a rule on any
// other wording of a risk reason is refused, since rules match facts, not
// what an agent wrote.
// Example: "kind=mcp,tier=commit; kind=tool,tool=Bash; protected=true; window".
func ParseStepUp(s string) (StepUpPolicy, error) {
	switch strings.TrimSpace(s) {
	case "", "default":
		return DefaultStepUp, nil
	case "none":
		return StepUpPolicy{}, nil
	}
	var p StepUpPolicy
	for _, rule := range strings.Split(s, ";") {
		rule = strings.TrimSpace(rule)
		switch rule {
		case "":
			continue
		case "window", "windows":
			p.Windows = true
			continue
		case "default":
			p.Rules = append(p.Rules, DefaultStepUp.Rules...)
			p.Windows = true
			continue
		}
		r, err := parseStepUpRule(rule)
		if err != nil {
			return StepUpPolicy{}, err
		}
		p.Rules = append(p.Rules, r)
	}
	return p, nil
}

// parseStepUpRule reads one rule of field=value pairs.
func parseStepUpRule(rule string) (StepUpRule, error) {
	var r StepUpRule
	for _, field := range strings.Split(rule, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(field), "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || v == "" {
			return r, fmt.Errorf("step-up rule %q: %q is not field=value", rule, field)
		}
		switch k {
		case "kind":
			if !countersign.Kind(v).Valid() {
				return r, fmt.Errorf("step-up rule %q: no kind %q (rm, tool, mcp, generic)", rule, v)
			}
			r.Kind = countersign.Kind(v)
		case "tier":
			if !countersign.Tier(v).Valid() {
				return r, fmt.Errorf("step-up rule %q: no tier %q (read, write, commit, external)", rule, v)
			}
			r.Tier = countersign.Tier(v)
		case "tool":
			r.Tool = v
		case "protected":
			if v != "true" {
				return r, fmt.Errorf("step-up rule %q: protected can only be true (leave it out to match any request)", rule)
			}
			r.Protected = true
		case "reason":
			if !slices.Contains(legacyProtectedReason, v) {
				return r, fmt.Errorf("step-up rule %q: reason=%q can no longer be used: rules match facts of a request, not the wording of its risk reasons; "+
					"use kind, tier, tool or protected=true (reason=protected path: * reads as protected=true)", rule, v)
			}
			r.Protected = true
		default:
			return r, fmt.Errorf("step-up rule %q: no field %q (kind, tier, tool, protected)", rule, k)
		}
	}
	return r, nil
}

// Active reports whether the policy asks a passkey for anything.
func (p StepUpPolicy) Active() bool { return len(p.Rules) > 0 || p.Windows }

// Requires reports whether approving r with d needs a passkey.
func (p StepUpPolicy) Requires(r *countersign.Request, d countersign.DecisionInput) bool {
	if d.Decision != countersign.DecisionApprove {
		return false // refusing stays one click
	}
	if p.Windows && d.AutoApproveMinutes > 0 {
		return true
	}
	return p.Matches(r)
}

// Matches reports whether a rule names the request, whatever the decision.
func (p StepUpPolicy) Matches(r *countersign.Request) bool {
	for _, rule := range p.Rules {
		if rule.matches(r) {
			return true
		}
	}
	return false
}

func (rule StepUpRule) matches(r *countersign.Request) bool {
	if rule.Kind != "" && r.Kind != rule.Kind {
		return false
	}
	if rule.Tool != "" && !glob(rule.Tool, r.Action) {
		return false
	}
	if rule.Tier != "" && r.Tier != rule.Tier && !UnknownTier(r) {
		return false
	}
	if rule.Protected && !r.Protected {
		return false
	}
	return true
}

// UnknownTier reports whether r is an MCP request whose tier is not known:
// one stored before tiers were kept, or asked without one. Every rule on
// tiers treats it as the riskiest.
func UnknownTier(r *countersign.Request) bool {
	return r.Kind == countersign.KindMCP && r.Tier == ""
}

// TierReason is the risk reason by which an MCP request shows its call's
// tier to the human, in words: "tier: commit". The rules read the
// request's Tier, never this text.
func TierReason(t countersign.Tier) string { return "tier: " + string(t) }

// glob matches s against a pattern where * is any run of characters and
// everything else is itself.
func glob(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, part := range parts[1 : len(parts)-1] {
		i := strings.Index(s, part)
		if i < 0 {
			return false
		}
		s = s[i+len(part):]
	}
	return strings.HasSuffix(s, parts[len(parts)-1])
}

// ErrPasskeyNeeded refuses an approval that needs a passkey and came
// without a verified assertion: from a session cookie alone, a script, the
// terminal client, an approver token or an e-mailed link.
var ErrPasskeyNeeded = countersign.Errorf(countersign.EFORBIDDEN,
	"Approving this request needs a passkey: approve it on its inbox page in a browser and confirm with your passkey (add one under Passkeys). Deny, answer and stop need none")

// checkStepUp refuses an approval the policy names unless it carries a
// verification of exactly this request, binding, decision and window.
func (s *Service) checkStepUp(r *countersign.Request, d countersign.DecisionInput) error {
	if !s.cfg.StepUp.Requires(r, d) {
		return nil
	}
	v := d.Verified
	if v == nil || v.Method != "webauthn" || v.RequestID != r.ID || v.BindingHash != r.BindingHash() ||
		v.Decision != d.Decision || v.Minutes != d.AutoApproveMinutes {
		return ErrPasskeyNeeded
	}
	return nil
}

// NeedsStepUp reports whether approving r with d needs a passkey under the
// service's policy, for the pages to offer the ceremony.
func (s *Service) NeedsStepUp(r *countersign.Request, d countersign.DecisionInput) bool {
	return s.cfg.StepUp.Requires(r, d)
}

// StepUpPolicy returns the service's policy.
func (s *Service) StepUpPolicy() StepUpPolicy { return s.cfg.StepUp }

// stepUpPossible reports whether a decision could need a passkey, so that
// Decide reads the request before deciding.
func (s *Service) stepUpPossible(d countersign.DecisionInput) bool {
	return d.Decision == countersign.DecisionApprove && s.cfg.StepUp.Active()
}
