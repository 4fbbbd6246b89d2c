package countersign

import (
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

// TestBindingHash: the hash of a binding is stable (a ceremony begun by
// one binary is verified by another) and changes with each of its parts.
func TestBindingHash(t *testing.T) {
	r := Request{Kind: KindMCP, Action: "deploy",
		ArgsHash:    "fdf65bc0fcace2d9faa201074629f8b59f8fed36951697309a4df91be5b0261b",
		PreviewHash: "0c65e8ad19a5ff4a573d75d9beff89c865e48ce2f3df8030c0c141d26d2cc459"}
	const want = "2e6ab8ca7e8ad32bacaefe14c30921e887a3822ce8a1eebed7fa7b81d666a9dd"
	if got := r.BindingHash(); got != want {
		t.Fatalf("BindingHash = %s, want %s", got, want)
	}
	for name, change := range map[string]func(*Request){
		"kind":         func(r *Request) { r.Kind = KindTool },
		"action":       func(r *Request) { r.Action = "deploy2" },
		"args hash":    func(r *Request) { r.ArgsHash = r.PreviewHash },
		"preview hash": func(r *Request) { r.PreviewHash = r.ArgsHash },
	} {
		other := r
		change(&other)
		if other.BindingHash() == want {
			t.Errorf("changing the %s keeps the binding hash", name)
		}
	}
}
