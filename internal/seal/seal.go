// Package seal seals values with AES-GCM for what the server must read
// back but no copy of its database may: server keys under the secret key,
// seed secrets, channel secrets and outbox payloads under server keys,
// file ids and file blobs.
//
// A value is sealed as nonce || ciphertext || tag, with a fresh random
// nonce of NonceSize bytes. Its additional data binds it to its place (a
// row's id, a key's name), so that a sealed value moved to another place
// does not open. Every value stored so far has this layout: changing it
// leaves stored data unreadable.
package seal

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
)

// Sizes of the layout: the nonce before the ciphertext and the tag after
// it.
const (
	NonceSize = 12
	TagSize   = 16
	// Overhead is how much longer a sealed value is than the value.
	Overhead = NonceSize + TagSize
)

// KeySize is the size of the keys the server draws: AES-256.
const KeySize = 32

// Errors of Open.
var (
	ErrTooShort = errors.New("sealed value is too short")
	ErrNotOpen  = errors.New("sealed value does not open under this key")
)

// Key seals and opens under one AES key.
type Key struct {
	aead cipher.AEAD
}

// New returns the key of raw: 16, 24 or 32 bytes (AES-128, -192, -256).
func New(raw []byte) (*Key, error) {
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Key{aead: aead}, nil
}

// NewRandom returns a key of KeySize random bytes that only this process
// holds: what it seals does not outlive the process.
func NewRandom() (*Key, error) {
	raw := make([]byte, KeySize)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	return New(raw)
}

// ServerKeys is the part of a store that keeps the server's keys.
type ServerKeys interface {
	ServerKey(ctx context.Context, name string, size int) ([]byte, error)
}

// FromStore returns the key of the server key name, drawn by the store the
// first time it is asked for.
func FromStore(ctx context.Context, s ServerKeys, name string) (*Key, error) {
	raw, err := s.ServerKey(ctx, name, KeySize)
	if err != nil {
		return nil, err
	}
	return New(raw)
}

// Seal seals plain with a fresh random nonce, bound to ad.
func (k *Key) Seal(plain, ad []byte) []byte {
	nonce := make([]byte, NonceSize, NonceSize+len(plain)+TagSize)
	rand.Read(nonce)
	return k.aead.Seal(nonce, nonce, plain, ad)
}

// Open opens what Seal sealed with the same key and ad. Errors:
// ErrTooShort, ErrNotOpen.
func (k *Key) Open(sealed, ad []byte) ([]byte, error) {
	if len(sealed) < NonceSize {
		return nil, ErrTooShort
	}
	plain, err := k.aead.Open(nil, sealed[:NonceSize], sealed[NonceSize:], ad)
	if err != nil {
		return nil, ErrNotOpen
	}
	return plain, nil
}

// SealAt appends to dst plain sealed under a nonce of NonceSize bytes the
// caller chose, without the nonce: for a stream whose nonces are a prefix
// and a chunk's number, each used once. dst may be plain[:0].
func (k *Key) SealAt(dst, nonce, plain, ad []byte) []byte {
	return k.aead.Seal(dst, nonce, plain, ad)
}

// OpenAt opens what SealAt sealed under nonce, appending to dst, which
// may be sealed[:0]. Errors: ErrNotOpen.
func (k *Key) OpenAt(dst, nonce, sealed, ad []byte) ([]byte, error) {
	plain, err := k.aead.Open(dst, nonce, sealed, ad)
	if err != nil {
		return nil, ErrNotOpen
	}
	return plain, nil
}
