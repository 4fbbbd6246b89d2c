package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/seal"
)

// keyName is the server key that seals outbox payloads and channel
// secrets.
const keyName = "outbox"

// keyring seals and opens under the server's outbox key, drawn from the
// store once and kept: ServerKey is a write on some stores.
type keyring struct {
	store countersign.Store
	mu    sync.Mutex
	key   *seal.Key
}

func (k *keyring) get(ctx context.Context) (*seal.Key, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.key != nil {
		return k.key, nil
	}
	key, err := seal.FromStore(ctx, k.store, keyName)
	if err != nil {
		return nil, fmt.Errorf("read the outbox key: %w", err)
	}
	k.key = key
	return key, nil
}

// seal encrypts plain with a fresh nonce. ad binds the result to one row
// (an item or a channel id), so that a sealed value moved to another row
// does not open.
func (k *keyring) seal(ctx context.Context, plain []byte, ad string) ([]byte, error) {
	key, err := k.get(ctx)
	if err != nil {
		return nil, err
	}
	return key.Seal(plain, []byte(ad)), nil
}

func (k *keyring) open(ctx context.Context, sealed []byte, ad string) ([]byte, error) {
	key, err := k.get(ctx)
	if err != nil {
		return nil, err
	}
	plain, err := key.Open(sealed, []byte(ad))
	if errors.Is(err, seal.ErrNotOpen) {
		return nil, errors.New("sealed value does not open under the outbox key")
	}
	return plain, err
}

// payload is what an outbox item carries beside the request it is about.
// Everything else is read from the store when the item is sent, so that a
// late notification shows the request as it is then.
type payload struct {
	// Links maps a link action (approve, deny, stop) to the token of its
	// one-time link. Only channels that carry links get them.
	Links map[string]string `json:"links,omitempty"`
}

func itemAD(id string) string    { return "outbox:" + id }
func channelAD(id string) string { return "channel:" + id }

func (k *keyring) sealPayload(ctx context.Context, id string, p payload) ([]byte, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	return k.seal(ctx, b, itemAD(id))
}

func (k *keyring) openPayload(ctx context.Context, it *countersign.OutboxItem) (payload, error) {
	var p payload
	b, err := k.open(ctx, it.Payload, itemAD(it.ID))
	if err != nil {
		return p, fmt.Errorf("open the payload: %w", err)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("decode the payload: %w", err)
	}
	return p, nil
}

// sealSecret seals a channel's secret; an empty secret stays empty.
func (k *keyring) sealSecret(ctx context.Context, channelID, secret string) ([]byte, error) {
	if secret == "" {
		return nil, nil
	}
	return k.seal(ctx, []byte(secret), channelAD(channelID))
}

func (k *keyring) openSecret(ctx context.Context, c *countersign.Channel) (string, error) {
	if len(c.Secret) == 0 {
		return "", nil
	}
	b, err := k.open(ctx, c.Secret, channelAD(c.ID))
	if err != nil {
		return "", fmt.Errorf("open the secret of channel %s: %w", c.Name, err)
	}
	return string(b), nil
}
