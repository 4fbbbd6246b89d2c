package approval

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"fmt"

	"github.com/countersign/countersign"
)

// seedKeyName is the server key that seals the secrets of seed keys.
const seedKeyName = "seed-secret"

// sealSeedSecret seals an agent key's secret under the server's seed key,
// with the key's id as additional data so that a sealed secret cannot be
// moved to another key.
func sealSeedSecret(ctx context.Context, store countersign.Store, keyID, secret string) ([]byte, error) {
	aead, err := seedAEAD(ctx, store)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	rand.Read(nonce)
	return aead.Seal(nonce, nonce, []byte(secret), []byte(keyID)), nil
}

func openSeedSecret(aead cipher.AEAD, k *countersign.AgentKey) ([]byte, error) {
	n := aead.NonceSize()
	if len(k.SeedSecret) < n {
		return nil, fmt.Errorf("sealed secret of %s is too short", k.ID)
	}
	return aead.Open(nil, k.SeedSecret[:n], k.SeedSecret[n:], []byte(k.ID))
}

func seedAEAD(ctx context.Context, store countersign.Store) (cipher.AEAD, error) {
	key, err := store.ServerKey(ctx, seedKeyName, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
