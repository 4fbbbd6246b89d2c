package notify

import (
	"bytes"
	"context"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/countersign/countersign"
)

// serverKeys is a store that holds one outbox key.
type serverKeys struct{ countersign.Store }

func (serverKeys) ServerKey(context.Context, string, int) ([]byte, error) {
	return bytes.Repeat([]byte{0x43}, 32), nil
}

// TestOpensStored: a channel secret and an outbox payload sealed before
// the sealing moved to internal/seal, kept here as they were stored, open;
// moved to another row, they do not.
func TestOpensStored(t *testing.T) {
	ctx := context.Background()
	k := &keyring{store: serverKeys{}}
	secret, _ := hex.DecodeString("baeb6afc22a37ecdd4de58d4bcd9b4d76658dcfc62984fc29159ad16788b47718e147a")
	if got, err := k.openSecret(ctx, &countersign.Channel{ID: "ch_1", Secret: secret}); err != nil || got != "hunter2" {
		t.Fatalf("openSecret = %q, %v", got, err)
	}
	payload, _ := hex.DecodeString("f1f6cce5489f2a74cffa331d3e4ad8e623934fe56dee32ddbf2efee82794a0d6f7cc0602d5bcddfc934662ec55561930914a91a340f515")
	p, err := k.openPayload(ctx, &countersign.OutboxItem{ID: "out_1", Payload: payload})
	if err != nil || p.Links["approve"] != "tok" {
		t.Fatalf("openPayload = %v, %v", p, err)
	}
	_, err = k.openSecret(ctx, &countersign.Channel{ID: "ch_2", Name: "hook", Secret: secret})
	if err == nil || !strings.Contains(err.Error(), "does not open under the outbox key") {
		t.Fatalf("a secret moved to another channel: %v", err)
	}
	_, err = k.openSecret(ctx, &countersign.Channel{ID: "ch_1", Name: "hook", Secret: secret[:5]})
	if err == nil || !strings.Contains(err.Error(), "sealed value is too short") {
		t.Fatalf("a secret cut short: %v", err)
	}
}
