package countersign

import (
	"testing"
	"time"
)

func TestTokenRules(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	live, revoked := &Grant{}, &Grant{RevokedAt: now}
	tok := &OAuthToken{ExpiresAt: now.Add(time.Minute)}
	if err := tok.Redeemable(live, now); err != nil || !tok.Presentable(live, now) {
		t.Errorf("a live token: %v", err)
	}
	wantErr(t, "revoked grant", tok.Redeemable(revoked, now), ENOTFOUND, "the grant was revoked")
	wantErr(t, "expired", tok.Redeemable(live, tok.ExpiresAt), ENOTFOUND, "the token expired")
	if tok.Presentable(revoked, now) || tok.Presentable(live, tok.ExpiresAt) {
		t.Errorf("Presentable of a revoked grant or an expired token")
	}
	used := &OAuthToken{ExpiresAt: now.Add(time.Minute), UsedAt: now}
	wantErr(t, "used", used.Redeemable(live, now), ECONFLICT, "the token was already used")
}
