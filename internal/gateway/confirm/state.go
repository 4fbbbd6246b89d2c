package confirm

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"golang.org/x/crypto/chacha20poly1305"
)

// stateAAD ties a sealed state to this use: the same key sealing anything
// else cannot produce a valid request state.
const stateAAD = "countersign/mcp-request-state/v1"

// requestState is what a 2026-07-28 client echoes back when it retries a
// call after an elicitation (and what the SDK's legacy middleware hands
// back in process). It is sealed, so the client can neither read nor
// change it, and bound to the principal, account, tool, argument hash,
// preview hash and an expiry: a state issued for one call by one principal
// opens for nothing else. It names the approval request it belongs to,
// whose single use makes the state single-use too.
type requestState struct {
	V           int    `json:"v"`
	Principal   string `json:"p"`
	Account     string `json:"a"`
	Tool        string `json:"t"`
	ArgsHash    string `json:"h"`
	PreviewHash string `json:"ph"`
	Request     string `json:"r"`
	Mode        string `json:"m"` // form or url
	// Decides is whether the form said that its Accept runs the call
	// (elicitation_decides). An Accept approves only if the form said so
	// and the key is marked still: a form that said "approve in the
	// inbox" never approves, whatever the configuration says by the time
	// it is answered.
	Decides bool  `json:"d,omitempty"`
	Expires int64 `json:"e"` // Unix seconds
}

// errBadState is every refusal of a request state: the client learns that
// the state is not good, not why.
var errBadState = errors.New("the confirmation state is invalid, expired or not this call's")

// stateCodec seals and opens request states with XChaCha20-Poly1305 under
// a server key.
type stateCodec struct {
	aead interface {
		NonceSize() int
		Overhead() int
		Seal(dst, nonce, plaintext, additionalData []byte) []byte
		Open(dst, nonce, ciphertext, additionalData []byte) ([]byte, error)
	}
}

// newStateCodec returns a codec under key: 32 bytes, or any other secret,
// which is hashed to 32 bytes.
func newStateCodec(key []byte) (*stateCodec, error) {
	if len(key) != chacha20poly1305.KeySize {
		sum := sha256.Sum256(key)
		key = sum[:]
	}
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, fmt.Errorf("request state key: %w", err)
	}
	return &stateCodec{aead: aead}, nil
}

// seal encrypts and authenticates st.
func (c *stateCodec) seal(st requestState) string {
	st.V = 1
	plain, _ := json.Marshal(st)
	nonce := make([]byte, c.aead.NonceSize(), c.aead.NonceSize()+len(plain)+c.aead.Overhead())
	rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(c.aead.Seal(nonce, nonce, plain, []byte(stateAAD)))
}

// open authenticates and decrypts a state and checks its expiry and its
// binding to the principal, account and call. Any failure is errBadState.
func (c *stateCodec) open(s string, now time.Time, want requestState) (requestState, error) {
	var st requestState
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) < c.aead.NonceSize()+c.aead.Overhead() || len(s) > 4096 {
		return st, errBadState
	}
	n := c.aead.NonceSize()
	plain, err := c.aead.Open(nil, raw[:n], raw[n:], []byte(stateAAD))
	if err != nil || json.Unmarshal(plain, &st) != nil || st.V != 1 {
		return st, errBadState
	}
	if now.Unix() >= st.Expires || !equal(st.Principal, want.Principal) || !equal(st.Account, want.Account) ||
		!equal(st.Tool, want.Tool) || !equal(st.ArgsHash, want.ArgsHash) || !equal(st.PreviewHash, want.PreviewHash) {
		return st, errBadState
	}
	return st, nil
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
