package countersign

import (
	"testing"
	"time"
)

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
