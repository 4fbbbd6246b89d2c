package countersign

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func wantErr(t *testing.T, what string, err error, code, message string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Code != code || e.Message != message {
		t.Errorf("%s: %v, want %s %q", what, err, code, message)
	}
}

func TestTransitionRules(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	pending := []Status{StatusPending}
	if err := (Transition{From: pending, To: StatusApproved, Window: &AutoApproveWindow{}}).Validate(); err != nil {
		t.Errorf("Validate of an approval with a window: %v", err)
	}
	wantErr(t, "no source", Transition{To: StatusDenied}.Validate(), EINVALID, "a transition needs a known target and at least one source status")
	wantErr(t, "window on a denial", Transition{From: pending, To: StatusDenied, Window: &AutoApproveWindow{}}.Validate(),
		EINVALID, "only an approval opens an auto-approve window")
	for s, want := range map[Status]bool{StatusApproved: true, StatusDenied: true, StatusResponded: true, StatusStopped: true,
		StatusPending: false, StatusConsumed: false, StatusCancelled: false, StatusExpired: false} {
		if s.IsDecision() != want {
			t.Errorf("%s.IsDecision() = %v, want %v", s, !want, want)
		}
	}
	stop := Transition{To: StatusStopped}
	if !stop.EndsSession("s1") || stop.EndsSession("") || (Transition{To: StatusDenied}).EndsSession("s1") {
		t.Errorf("EndsSession: only a stop of a request of a session ends it")
	}
	r := &Request{KeyID: "k1", AccountID: "a1", Status: StatusDenied, ExpiresAt: now.Add(time.Hour)}
	wantErr(t, "another key", RefuseTransition(Transition{KeyID: "k2", Now: now}, r), ENOTFOUND, "request not found")
	wantErr(t, "another account", RefuseTransition(Transition{AccountID: "a2", Now: now}, r), ENOTFOUND, "request not found")
	wantErr(t, "denied", RefuseTransition(Transition{KeyID: "k1", Now: now}, r), ECONFLICT, "request is already denied")
	r.Status = StatusPending
	wantErr(t, "pending", RefuseTransition(Transition{Now: now}, r), ECONFLICT, "request is still pending")
	wantErr(t, "past its expiry", RefuseTransition(Transition{Now: r.ExpiresAt}, r), ECONFLICT, "request has expired")
}

func TestPendingLimitRules(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if PendingLimit(&Request{Status: StatusPending}, 3) != 3 || PendingLimit(&Request{Status: StatusApproved}, 3) != 0 ||
		PendingLimit(&Request{Status: StatusPending}, 0) != 0 {
		t.Errorf("PendingLimit: only a pending request of a limited account is limited")
	}
	err := PendingLimitError(2, now.Add(90*time.Second), now)
	wantErr(t, "PendingLimitError", err, ELIMIT,
		"this account already has 2 requests waiting for a decision; decide or cancel one, or wait for one to expire, then ask again")
	if e := err.(*Error); e.RetryAfter != 90*time.Second {
		t.Errorf("RetryAfter = %v, want 1m30s", e.RetryAfter)
	}
	lo, hi := TwinTTLRange(&Request{ExpiresAt: now.Add(time.Minute)}, now)
	if lo != int64(time.Minute-time.Second) || hi != int64(time.Minute+time.Second) {
		t.Errorf("TwinTTLRange = %d, %d", lo, hi)
	}
}

func TestListRules(t *testing.T) {
	for limit, want := range map[int]int{0: 50, -1: 50, 7: 7, 500: 500, 501: 500} {
		if got := (RequestFilter{Limit: limit}).PageSize(); got != want {
			t.Errorf("PageSize(%d) = %d, want %d", limit, got, want)
		}
	}
	if AuditPageSize(0) != 1000 || AuditPageSize(3) != 3 {
		t.Errorf("AuditPageSize: 0 is 1000, 3 is 3")
	}
	if (RequestFilter{}).MatchesNothing() || !(RequestFilter{Statuses: []Status{}}).MatchesNothing() {
		t.Errorf("MatchesNothing: only an empty, non-nil list of statuses")
	}
	wantErr(t, "no account", RequestFilter{}.Check(), EINVALID, "an account is required to list requests")
}

func TestWindowOpenedBy(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := &Request{ID: "req_1", AccountID: "a1", KeyID: "k1"}
	w, err := AutoApproveWindow{SessionID: "s1"}.OpenedBy(r, now)
	if err != nil || w.ID == "" || w.AccountID != "a1" || w.KeyID != "k1" || w.RequestID != "req_1" || !w.CreatedAt.Equal(now) {
		t.Errorf("OpenedBy = %+v, %v", w, err)
	}
	for _, bad := range []AutoApproveWindow{{AccountID: "a2"}, {KeyID: "k2"}, {RequestID: "req_2"}} {
		_, err := bad.OpenedBy(r, now)
		wantErr(t, "a window of another", err, EINVALID, "an auto-approve window belongs to the request that opened it")
	}
}

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
	wantErr(t, "lost claim", RefuseAttempt(true), ECONFLICT, "the outbox item is no longer held by this claim")
	wantErr(t, "no item", RefuseAttempt(false), ENOTFOUND, "outbox item not found")
	wantErr(t, "replayed", RefusePasskeyUse(true), ECONFLICT,
		"the passkey's signature counter did not advance: the assertion was replayed or the passkey was copied")
	wantErr(t, "no passkey", RefusePasskeyUse(false), ENOTFOUND, "passkey not found")
}

func TestServerKeyRules(t *testing.T) {
	k, err := NewSecretKey(bytes.Repeat([]byte{7}, SecretKeySize))
	if err != nil {
		t.Fatal(err)
	}
	raw := bytes.Repeat([]byte{1}, 32)
	sealed, err := k.SealServerKey("session", raw)
	if err != nil {
		t.Fatalf("SealServerKey: %v", err)
	}
	if _, err := k.SealServerKey("session", sealed); !errors.Is(err, ErrCheckRemoved) {
		t.Errorf("SealServerKey of a sealed key: %v, want ErrCheckRemoved", err)
	}
	if got, err := OpenServerKey(k, "session", sealed, 32); err != nil || !bytes.Equal(got, raw) {
		t.Errorf("OpenServerKey = %x, %v", got, err)
	}
	if _, err := OpenServerKey(k, "other", sealed, 32); err == nil {
		t.Errorf("OpenServerKey under another name opened")
	}
	if _, err := OpenServerKey(nil, "session", raw, 16); err == nil || err.Error() != `server key "session" is 32 bytes, not 16` {
		t.Errorf("OpenServerKey of the wrong size: %v", err)
	}
	if e := KeyedEvent(5); e.Event != AuditKeyedEvent || e.Actor != "system" || e.Detail != `{"keyed_from":5}` {
		t.Errorf("KeyedEvent = %+v", e)
	}
}

func TestOutboxRules(t *testing.T) {
	r := &Request{ID: "req_1", AccountID: "a1", Outbox: []OutboxItem{{ChannelID: "c1"}, {ChannelID: "c2", RequestID: "req_x"}}}
	for i, it := range r.OutboxItems() {
		if it.RequestID != "req_1" || it.AccountID != "a1" || it.ChannelID != r.Outbox[i].ChannelID {
			t.Errorf("OutboxItems[%d] = %+v", i, it)
		}
	}
	if err := CheckClaim(1, time.Second); err != nil {
		t.Errorf("CheckClaim(1, 1s) = %v", err)
	}
	wantErr(t, "no lease", CheckClaim(1, 0), EINVALID, "a claim needs a positive limit and lease")
	wantErr(t, "no items", CheckClaim(0, time.Second), EINVALID, "a claim needs a positive limit and lease")
}
