package countersign

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"strings"
	"time"
)

// Credential prefixes make a leaked secret recognisable.
const (
	AgentKeyPrefix      = "csk_"
	ApproverTokenPrefix = "cst_"
)

// ReferenceAlphabet has no characters that read alike (0/O, 1/I/L, 5/S…).
const ReferenceAlphabet = "234679ACDEFGHJKMNPQRTUVWXYZ"

var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewID returns a random identifier with the prefix and 128 bits of
// randomness, such as "req_…".
func NewID(prefix string) string {
	var b [16]byte
	rand.Read(b[:])
	return prefix + lowerBase32.EncodeToString(b[:])
}

// sortedBase32 has the same characters as lowerBase32, in ASCII order, so
// that encoded bytes sort as the bytes do.
var sortedBase32 = base32.NewEncoding("234567abcdefghijklmnopqrstuvwxyz").WithPadding(base32.NoPadding)

// NewOrderedID returns an identifier with the prefix whose text sorts by
// the time it was made, to the millisecond, followed by 80 bits of
// randomness, such as "req_…". It is made of the characters of NewID and
// has its length. Rows keyed by such ids are added at the end of their
// index, where the newest rows, the ones in use, stay together.
func NewOrderedID(prefix string) string {
	var b [16]byte
	ms := uint64(time.Now().UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	rand.Read(b[6:])
	return prefix + sortedBase32.EncodeToString(b[:])
}

// NewSecret returns a credential with the prefix and 256 bits of randomness.
func NewSecret(prefix string) string {
	var b [32]byte
	rand.Read(b[:])
	return prefix + lowerBase32.EncodeToString(b[:])
}

// HashSecret returns the hex SHA-256 of a secret, the only form in which
// credentials are stored.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// SecretHint returns the part of a secret that is safe to show: its prefix
// and four characters.
func SecretHint(secret string) string {
	if len(secret) < 8 {
		return ""
	}
	return secret[:8] + "…"
}

// NewReference returns a random six-character reference code.
func NewReference() string {
	// Rejection sampling keeps every character equally likely: bytes of
	// 243 and above (9 × 27) are drawn again.
	const limit = 256 - 256%len(ReferenceAlphabet)
	out := make([]byte, 0, 6)
	var b [16]byte
	for len(out) < 6 {
		rand.Read(b[:])
		for _, c := range b {
			if int(c) < limit && len(out) < 6 {
				out = append(out, ReferenceAlphabet[int(c)%len(ReferenceAlphabet)])
			}
		}
	}
	return string(out)
}

// FormatReference shows a reference code as XXX-XXX.
func FormatReference(ref string) string {
	if len(ref) != 6 {
		return ref
	}
	return ref[:3] + "-" + ref[3:]
}

// ParseReference accepts a reference code as typed by a human: any case,
// with or without the dash or spaces. It reports false when the result is
// not six characters of the alphabet.
func ParseReference(s string) (string, bool) {
	s = strings.ToUpper(strings.NewReplacer("-", "", " ", "").Replace(strings.TrimSpace(s)))
	if len(s) != 6 {
		return "", false
	}
	for _, c := range s {
		if !strings.ContainsRune(ReferenceAlphabet, c) {
			return "", false
		}
	}
	return s, true
}

// Prefixes of OAuth credentials (ADR 0007's grants): authorization codes,
// access tokens, refresh tokens and the secrets of confidential clients.
const (
	OAuthCodePrefix    = "csz_"
	AccessTokenPrefix  = "csa_"
	RefreshTokenPrefix = "csr_"
	ClientSecretPrefix = "css_"
)
