package identity

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign"
)

// Authenticator turns bearer secrets into principals.
type Authenticator struct {
	Store countersign.Store
	// touched remembers when each grant's use was last recorded, so that
	// a busy grant is written at most once a minute.
	touched sync.Map
}

// Agent returns the principal of an agent key. An approver token, an
// unknown or a revoked key is EUNAUTHORIZED or EFORBIDDEN, never an agent.
func (a *Authenticator) Agent(ctx context.Context, secret string) (countersign.Agent, error) {
	if strings.HasPrefix(secret, countersign.ApproverTokenPrefix) {
		return countersign.Agent{}, countersign.Errorf(countersign.EFORBIDDEN, "this route takes an agent key (csk_…), not an approver token")
	}
	if !strings.HasPrefix(secret, countersign.AgentKeyPrefix) {
		return countersign.Agent{}, badCredential()
	}
	k, err := a.Store.AgentKeyByHash(ctx, countersign.HashSecret(secret))
	if countersign.ErrorCode(err) == countersign.ENOTFOUND || (err == nil && k.Revoked()) {
		return countersign.Agent{}, badCredential()
	} else if err != nil {
		return countersign.Agent{}, err
	}
	return countersign.Agent{KeyID: k.ID, AccountID: k.AccountID, KeyName: k.Name}, nil
}

// Approver returns the principal of an approver token.
func (a *Authenticator) Approver(ctx context.Context, secret string) (countersign.ApproverPrincipal, error) {
	if strings.HasPrefix(secret, countersign.AgentKeyPrefix) {
		return countersign.ApproverPrincipal{}, countersign.Errorf(countersign.EFORBIDDEN, "this route takes an approver token (cst_…); an agent key can never decide")
	}
	if !strings.HasPrefix(secret, countersign.ApproverTokenPrefix) {
		return countersign.ApproverPrincipal{}, badCredential()
	}
	t, ap, err := a.Store.ApproverTokenByHash(ctx, countersign.HashSecret(secret))
	if countersign.ErrorCode(err) == countersign.ENOTFOUND || (err == nil && t.Revoked()) {
		return countersign.ApproverPrincipal{}, badCredential()
	} else if err != nil {
		return countersign.ApproverPrincipal{}, err
	}
	return countersign.ApproverPrincipal{ApproverID: ap.ID, Username: ap.Username, AccountID: t.AccountID, Role: t.Role}, nil
}

// AccessAgent returns the principal of an OAuth access token issued for
// resource: the grant's key, with the grant's tiers. An unknown, expired
// or revoked token, or one for another resource, is EUNAUTHORIZED.
func (a *Authenticator) AccessAgent(ctx context.Context, token, resource string, now time.Time) (countersign.Agent, error) {
	if !strings.HasPrefix(token, countersign.AccessTokenPrefix) || len(token) > 200 {
		return countersign.Agent{}, badCredential()
	}
	t, g, err := a.Store.AccessToken(ctx, countersign.HashSecret(token), now)
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		return countersign.Agent{}, badCredential()
	} else if err != nil {
		return countersign.Agent{}, err
	}
	if resource == "" || strings.TrimSuffix(t.Resource, "/") != strings.TrimSuffix(resource, "/") {
		return countersign.Agent{}, countersign.Errorf(countersign.EUNAUTHORIZED, "the token was issued for another resource")
	}
	if last, ok := a.touched.Load(g.ID); !ok || now.Sub(last.(time.Time)) > time.Minute {
		a.touched.Store(g.ID, now)
		if err := a.Store.TouchGrant(ctx, g.ID, now); err != nil {
			return countersign.Agent{}, err
		}
	}
	return countersign.Agent{KeyID: g.KeyID, AccountID: g.AccountID, KeyName: g.KeyName, GrantID: g.ID, GrantTiers: g.Tiers}, nil
}

// MCPAgent returns the verifier of /mcp: an agent key, or an OAuth access
// token issued for resource.
func (a *Authenticator) MCPAgent(resource string, clock countersign.Clock) func(ctx context.Context, secret string) (countersign.Agent, error) {
	return func(ctx context.Context, secret string) (countersign.Agent, error) {
		if strings.HasPrefix(secret, countersign.AccessTokenPrefix) {
			return a.AccessAgent(ctx, secret, resource, clock.Now())
		}
		return a.Agent(ctx, secret)
	}
}

func badCredential() error {
	return countersign.Errorf(countersign.EUNAUTHORIZED, "the credential is unknown or revoked")
}

// SeedAgent returns the agent whose designated key made the signature: the
// hex HMAC-SHA256 of the raw body under the key exactly as printed (the
// seed's X-SafeRM-Signature and X-Claude-Signature). The comparison is in
// constant time. Errors: EUNAUTHORIZED.
func (a *Authenticator) SeedAgent(ctx context.Context, body []byte, signature string) (countersign.Agent, error) {
	sig, err := hex.DecodeString(strings.TrimPrefix(strings.TrimSpace(signature), "sha256="))
	if err != nil || len(sig) != sha256.Size {
		return countersign.Agent{}, countersign.Errorf(countersign.EUNAUTHORIZED, "missing or malformed signature")
	}
	keys, err := a.Store.SeedKeys(ctx)
	if err != nil {
		return countersign.Agent{}, err
	}
	if len(keys) == 0 {
		return countersign.Agent{}, countersign.Errorf(countersign.EUNAUTHORIZED, "no agent key is designated for these routes; create one with: countersign key create --seed-hmac")
	}
	key, err := seedKey(ctx, a.Store)
	if err != nil {
		return countersign.Agent{}, err
	}
	for _, k := range keys {
		secret, err := openSeedSecret(key, k)
		if err != nil {
			return countersign.Agent{}, err
		}
		m := hmac.New(sha256.New, secret)
		m.Write(body)
		if hmac.Equal(m.Sum(nil), sig) {
			return countersign.Agent{KeyID: k.ID, AccountID: k.AccountID, KeyName: k.Name}, nil
		}
	}
	return countersign.Agent{}, countersign.Errorf(countersign.EUNAUTHORIZED, "invalid signature")
}
