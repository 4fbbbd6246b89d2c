package countersign

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"sync"

	"github.com/countersign/countersign/internal/seal"
)

// SecretKeySize is the size of the server's secret key in bytes.
const SecretKeySize = 32

// SecretKey is the server's secret key, kept outside the database (a key
// file). It wraps every key the database holds (server keys), keys the
// audit chain (an HMAC in place of a bare hash) and proves, through a check
// value stored beside the data, that it is the key the store was sealed
// with. A copy of the database without it opens nothing.
//
// Three independent keys are derived from it with HKDF-SHA256, one per use,
// so that no use can stand in for another.
type SecretKey struct {
	wrap  *seal.Key
	audit []byte
	check []byte
	// macs are HMACs under audit, their key set up once and reset
	// between entries: an entry costs its own blocks only.
	macs *sync.Pool
}

// NewSecretKey derives the working keys from the raw key of a key file.
func NewSecretKey(raw []byte) (*SecretKey, error) {
	if len(raw) != SecretKeySize {
		return nil, fmt.Errorf("a secret key is %d bytes, not %d", SecretKeySize, len(raw))
	}
	derive := func(label string) []byte {
		b, err := hkdf.Key(sha256.New, raw, nil, "countersign "+label, 32)
		if err != nil {
			panic(err) // only for a length HKDF cannot give
		}
		return b
	}
	wrap, err := seal.New(derive("server key wrap v1"))
	if err != nil {
		return nil, err
	}
	audit := derive("audit chain v1")
	macs := &sync.Pool{New: func() any { return hmac.New(sha256.New, audit) }}
	return &SecretKey{wrap: wrap, audit: audit, check: derive("key check v1"), macs: macs}, nil
}

// serverKeyAD binds a wrapped server key to its name, so that one wrapped
// key put in another's row does not open.
func serverKeyAD(name string) []byte { return []byte("countersign server key:" + name) }

// WrapServerKey seals a server key for its row in the store.
func (k *SecretKey) WrapServerKey(name string, key []byte) []byte {
	return k.wrap.Seal(key, serverKeyAD(name))
}

// ErrServerKeySealed is returned when a server key does not open under the
// secret key.
var ErrServerKeySealed = errors.New("the server key does not open under the secret key")

// UnwrapServerKey opens a server key that WrapServerKey sealed. Errors:
// ErrServerKeySealed.
func (k *SecretKey) UnwrapServerKey(name string, wrapped []byte) ([]byte, error) {
	key, err := k.wrap.Open(wrapped, serverKeyAD(name))
	if err != nil {
		return nil, ErrServerKeySealed
	}
	return key, nil
}

// AuditMAC returns the keyed chain value of e: HMAC-SHA256 under the audit
// key of the same encoding ComputeHash hashes, in hex. Without the key, a
// rewritten chain cannot be given valid values.
func (k *SecretKey) AuditMAC(e *AuditEntry) string {
	var m hash.Hash
	if k.macs != nil {
		m = k.macs.Get().(hash.Hash)
		defer k.macs.Put(m)
		m.Reset()
	} else {
		m = hmac.New(sha256.New, k.audit)
	}
	m.Write([]byte(e.encode()))
	var sum [sha256.Size]byte
	return hex.EncodeToString(m.Sum(sum[:0]))
}

// AuditPads returns the audit key XORed with HMAC's inner and outer pads,
// so that a database can compute AuditMAC as
// SHA-256(opad || SHA-256(ipad || message)) with a plain SHA-256 function.
func (k *SecretKey) AuditPads() (ipad, opad []byte) {
	ipad, opad = make([]byte, sha256.BlockSize), make([]byte, sha256.BlockSize)
	copy(ipad, k.audit)
	copy(opad, k.audit)
	for i := range ipad {
		ipad[i] ^= 0x36
		opad[i] ^= 0x5c
	}
	return ipad, opad
}

// KeyCheck is what a store records of the secret key it is sealed with:
// from which audit entry on the chain is keyed, and a MAC of that number
// under the key, which only the same key reproduces. It proves the key
// without revealing it, and a changed start of the keyed chain does not
// verify.
type KeyCheck struct {
	AuditKeyedFrom int64
	MAC            string
}

// NewKeyCheck returns the check of a store whose audit chain is keyed from
// entry keyedFrom on.
func (k *SecretKey) NewKeyCheck(keyedFrom int64) KeyCheck {
	return KeyCheck{AuditKeyedFrom: keyedFrom, MAC: k.checkMAC(keyedFrom)}
}

func (k *SecretKey) checkMAC(keyedFrom int64) string {
	m := hmac.New(sha256.New, k.check)
	m.Write([]byte("countersign key check v1:" + strconv.FormatInt(keyedFrom, 10)))
	return hex.EncodeToString(m.Sum(nil))
}

// ErrWrongSecretKey is returned when a store was sealed with another
// secret key than the one given.
var ErrWrongSecretKey = errors.New("the secret key file is not the one this store's keys were sealed with")

// ErrSecretKeyNeeded is returned when a store sealed with a secret key is
// opened without one.
var ErrSecretKeyNeeded = errors.New("this store's keys are sealed with a secret key file; open it with that file (COUNTERSIGN_SECRET_KEY_FILE)")

// Verify checks that c was made by this key. Errors: ErrWrongSecretKey.
func (k *SecretKey) Verify(c KeyCheck) error {
	if !hmac.Equal([]byte(k.checkMAC(c.AuditKeyedFrom)), []byte(c.MAC)) {
		return ErrWrongSecretKey
	}
	return nil
}

// KeyedAuditor is implemented by a store opened with a secret key: it
// tells from which entry on its audit chain is keyed (0 when it is not
// keyed at all) and with which key, for countersign audit verify.
type KeyedAuditor interface {
	AuditKeyedFrom() int64
	SecretKey() *SecretKey
}

// ErrCheckRemoved is the error of a store whose server keys are wrapped
// with the secret key but whose record of it is gone: sealing it again
// would wrap them twice and key a chain that may have been rewritten
// meanwhile.
var ErrCheckRemoved = errors.New("the store's server keys are sealed with this secret key but its record of the key (table secret_key) is gone; the database was tampered with or restored in part")

// SealServerKey wraps the server key name of a store being sealed. A key
// that the secret key already opens was sealed before: ErrCheckRemoved.
func (k *SecretKey) SealServerKey(name string, key []byte) ([]byte, error) {
	if _, err := k.UnwrapServerKey(name, key); err == nil {
		return nil, ErrCheckRemoved
	}
	return k.WrapServerKey(name, key), nil
}

// OpenServerKey returns the stored server key name as it is used: opened
// with k (stored as it is when k is nil) and size bytes long.
func OpenServerKey(k *SecretKey, name string, stored []byte, size int) ([]byte, error) {
	key := stored
	if k != nil {
		var err error
		if key, err = k.UnwrapServerKey(name, stored); err != nil {
			return nil, fmt.Errorf("server key %q: %w", name, err)
		}
	}
	if len(key) != size {
		return nil, fmt.Errorf("server key %q is %d bytes, not %d", name, len(key), size)
	}
	return key, nil
}
