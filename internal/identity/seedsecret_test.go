package identity

import (
	"bytes"
	"context"
	"encoding/hex"
	"testing"

	"github.com/countersign/countersign"
)

// seedKeys is a store that holds one seed key.
type seedKeys struct{ countersign.Store }

func (seedKeys) ServerKey(context.Context, string, int) ([]byte, error) {
	return bytes.Repeat([]byte{0x44}, 32), nil
}

// TestSeedSecretStored: a seed secret sealed before the sealing moved to
// internal/seal, kept here as it was stored, opens for its key and for no
// other.
func TestSeedSecretStored(t *testing.T) {
	stored, _ := hex.DecodeString("701c060ea2c4fd7356b6866726fdd87f0c30249d7373e69d78e3c51d568cbd2422bd86e5727e")
	key, err := seedKey(context.Background(), seedKeys{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := openSeedSecret(key, &countersign.AgentKey{ID: "key_1", SeedSecret: stored}); err != nil || string(got) != "csk_secret" {
		t.Fatalf("openSeedSecret = %q, %v", got, err)
	}
	if _, err := openSeedSecret(key, &countersign.AgentKey{ID: "key_2", SeedSecret: stored}); err == nil {
		t.Fatalf("a secret moved to another key opens")
	}
	if _, err := openSeedSecret(key, &countersign.AgentKey{ID: "key_1", SeedSecret: stored[:4]}); err == nil || err.Error() != "sealed secret of key_1 is too short" {
		t.Fatalf("a secret cut short: %v", err)
	}
}
