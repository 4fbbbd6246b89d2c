package identity

import (
	"context"
	"errors"
	"fmt"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/seal"
)

// seedKeyName is the server key that seals the secrets of seed keys.
const seedKeyName = "seed-secret"

// sealSeedSecret seals an agent key's secret under the server's seed key,
// with the key's id as additional data so that a sealed secret cannot be
// moved to another key.
func sealSeedSecret(ctx context.Context, store countersign.Store, keyID, secret string) ([]byte, error) {
	key, err := seedKey(ctx, store)
	if err != nil {
		return nil, err
	}
	return key.Seal([]byte(secret), []byte(keyID)), nil
}

func openSeedSecret(key *seal.Key, k *countersign.AgentKey) ([]byte, error) {
	secret, err := key.Open(k.SeedSecret, []byte(k.ID))
	if errors.Is(err, seal.ErrTooShort) {
		return nil, fmt.Errorf("sealed secret of %s is too short", k.ID)
	}
	return secret, err
}

func seedKey(ctx context.Context, store countersign.Store) (*seal.Key, error) {
	return seal.FromStore(ctx, store, seedKeyName)
}
