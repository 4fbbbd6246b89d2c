package seal

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"testing"
)

func key(t *testing.T, b byte) *Key {
	t.Helper()
	k, err := New(bytes.Repeat([]byte{b}, KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestOpensStored: a value sealed before this package existed (a channel
// secret the notifier sealed, kept here as it was stored) opens.
func TestOpensStored(t *testing.T) {
	stored, _ := hex.DecodeString("baeb6afc22a37ecdd4de58d4bcd9b4d76658dcfc62984fc29159ad16788b47718e147a")
	got, err := key(t, 0x43).Open(stored, []byte("channel:ch_1"))
	if err != nil || string(got) != "hunter2" {
		t.Fatalf("Open = %q, %v", got, err)
	}
}

func TestSealOpen(t *testing.T) {
	k := key(t, 1)
	plain := []byte("the secret")
	s := k.Seal(plain, []byte("row:1"))
	if len(s) != len(plain)+Overhead || bytes.Contains(s, plain) {
		t.Fatalf("sealed %x: %d bytes", s, len(s))
	}
	if bytes.Equal(s, k.Seal(plain, []byte("row:1"))) {
		t.Fatalf("two seals of one value are alike: the nonce is not fresh")
	}
	if got, err := k.Open(s, []byte("row:1")); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	tampered := bytes.Clone(s)
	tampered[NonceSize] ^= 1
	for name, tt := range map[string]struct {
		k    *Key
		s    []byte
		ad   string
		want error
	}{
		"another key": {key(t, 2), s, "row:1", ErrNotOpen},
		"another row": {k, s, "row:2", ErrNotOpen},
		"changed":     {k, tampered, "row:1", ErrNotOpen},
		"cut to tag":  {k, s[:NonceSize+3], "row:1", ErrNotOpen},
		"cut short":   {k, s[:NonceSize-1], "row:1", ErrTooShort},
		"empty":       {k, nil, "row:1", ErrTooShort},
	} {
		if _, err := tt.k.Open(tt.s, []byte(tt.ad)); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", name, err, tt.want)
		}
	}
	if _, err := New(make([]byte, 7)); err == nil {
		t.Errorf("a 7-byte key was taken")
	}
}

func TestSealAt(t *testing.T) {
	k := key(t, 3)
	nonce := bytes.Repeat([]byte{9}, NonceSize)
	s := k.SealAt(nil, nonce, []byte("chunk"), []byte{1})
	if got, err := k.OpenAt(nil, nonce, s, []byte{1}); err != nil || string(got) != "chunk" {
		t.Fatalf("OpenAt = %q, %v", got, err)
	}
	if _, err := k.OpenAt(nil, nonce, s, []byte{0}); !errors.Is(err, ErrNotOpen) {
		t.Fatalf("OpenAt of another chunk's data: %v", err)
	}
}

type keys map[string][]byte

func (m keys) ServerKey(_ context.Context, name string, size int) ([]byte, error) {
	if _, ok := m[name]; !ok {
		m[name] = bytes.Repeat([]byte{byte(len(m) + 1)}, size)
	}
	return m[name], nil
}

func TestFromStore(t *testing.T) {
	m := keys{}
	a, err := FromStore(context.Background(), m, "outbox")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := FromStore(context.Background(), m, "outbox")
	other, _ := FromStore(context.Background(), m, "seed-secret")
	s := a.Seal([]byte("x"), nil)
	if _, err := b.Open(s, nil); err != nil {
		t.Errorf("the same server key does not open: %v", err)
	}
	if _, err := other.Open(s, nil); err == nil {
		t.Errorf("another server key opens")
	}
}
