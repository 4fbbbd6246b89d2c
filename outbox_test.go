package countersign

import (
	"testing"
	"time"
)

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
	wantErr(t, "lost claim", RefuseAttempt(true), ECONFLICT, "the outbox item is no longer held by this claim")
	wantErr(t, "no item", RefuseAttempt(false), ENOTFOUND, "outbox item not found")
}
