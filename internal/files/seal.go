package files

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Overhead is what sealing adds to a file: the nonce and the tag. A buffer
// with this much spare capacity is sealed in place.
const Overhead = 12 + 16

// sealer seals with AES-256-GCM under a key of this process alone.
type sealer struct {
	aead cipher.AEAD
}

func newSealer() (*sealer, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

// seal returns nonce || ciphertext || tag. With Overhead bytes of spare
// capacity in data, it reuses data's memory: the plain text moves up by
// the nonce's length and is encrypted where it lies.
func (s *sealer) seal(data, ad []byte) []byte {
	var nonce [12]byte
	rand.Read(nonce[:])
	n := len(data)
	if cap(data)-n >= Overhead {
		buf := data[:n+12]
		copy(buf[12:], buf[:n])
		copy(buf[:12], nonce[:])
		return s.aead.Seal(buf[:12], nonce[:], buf[12:12+n], ad)
	}
	out := make([]byte, 12, n+Overhead)
	copy(out, nonce[:])
	return s.aead.Seal(out, nonce[:], data, ad)
}

// open returns the plain text of a sealed blob: in place when the blob is
// the caller's own (read from disk), else in a new buffer, since the
// memory store's blob must stay sealed.
func (s *sealer) open(sealed, ad []byte, own bool) ([]byte, error) {
	if len(sealed) < Overhead {
		return nil, errors.New("a sealed file is too short")
	}
	dst := sealed[12:12]
	if !own {
		dst = make([]byte, 0, len(sealed)-Overhead)
	}
	out, err := s.aead.Open(dst, sealed[:12], sealed[12:], ad)
	if err != nil {
		return nil, fmt.Errorf("open a sealed file: %w", err)
	}
	return out, nil
}

// blobs keeps sealed bytes by record id.
type blobs interface {
	put(id string, sealed []byte) error
	get(id string) ([]byte, error)
	del(id string)
}

type memBlobs struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (b *memBlobs) put(id string, sealed []byte) error {
	b.mu.Lock()
	b.m[id] = sealed
	b.mu.Unlock()
	return nil
}

func (b *memBlobs) get(id string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.m[id]
	if !ok {
		return nil, os.ErrNotExist
	}
	return v, nil
}

func (b *memBlobs) del(id string) {
	b.mu.Lock()
	delete(b.m, id)
	b.mu.Unlock()
}

// diskBlobs keeps sealed bytes in a folder of its own, 0700, files 0600.
type diskBlobs struct{ dir string }

// openDiskBlobs empties and opens the folder. The caller holds the data
// directory's lock, so no other server uses it.
func openDiskBlobs(dir string) (*diskBlobs, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("empty the file folder %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the file folder %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	return &diskBlobs{dir: dir}, nil
}

func (b *diskBlobs) path(id string) string { return filepath.Join(b.dir, blobName(id)) }

func (b *diskBlobs) put(id string, sealed []byte) error {
	f, err := os.OpenFile(b.path(id), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(sealed); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	return f.Close()
}

func (b *diskBlobs) get(id string) ([]byte, error) { return os.ReadFile(b.path(id)) }

func (b *diskBlobs) del(id string) { os.Remove(b.path(id)) }
