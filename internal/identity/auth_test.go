package identity_test

import (
	"testing"

	"github.com/countersign/countersign"
)

func TestAuthenticator(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, key, err := e.admin.CreateAgentKey(e.ctx, "acme", "laptop")
	if err != nil {
		t.Fatal(err)
	}
	_, revoked, err := e.admin.CreateAgentKey(e.ctx, "acme", "old")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.RevokeAgentKey(e.ctx, e.acme.ID, "old", e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	_, token, err := e.admin.CreateApproverToken(e.ctx, "alice", "", "")
	if err != nil {
		t.Fatal(err)
	}

	if a, err := e.auth.Agent(e.ctx, key); err != nil || a.AccountID != e.acme.ID || a.KeyName != "laptop" {
		t.Errorf("Agent(valid key) = %+v, %v", a, err)
	}
	if p, err := e.auth.Approver(e.ctx, token); err != nil || p.AccountID != e.acme.ID || p.Username != "alice" {
		t.Errorf("Approver(valid token) = %+v, %v", p, err)
	}
	tests := []struct {
		name     string
		approver bool
		secret   string
		code     string
	}{
		{"approver token as agent", false, token, countersign.EFORBIDDEN},
		{"unknown key", false, countersign.NewSecret(countersign.AgentKeyPrefix), countersign.EUNAUTHORIZED},
		{"revoked key", false, revoked, countersign.EUNAUTHORIZED},
		{"garbage as agent", false, "hunter2", countersign.EUNAUTHORIZED},
		{"empty as agent", false, "", countersign.EUNAUTHORIZED},
		{"agent key as approver", true, key, countersign.EFORBIDDEN},
		{"unknown token", true, countersign.NewSecret(countersign.ApproverTokenPrefix), countersign.EUNAUTHORIZED},
		{"garbage as approver", true, "hunter2", countersign.EUNAUTHORIZED},
	}
	for _, tt := range tests {
		var err error
		if tt.approver {
			_, err = e.auth.Approver(e.ctx, tt.secret)
		} else {
			_, err = e.auth.Agent(e.ctx, tt.secret)
		}
		wantCode(t, tt.name, err, tt.code)
	}
}
