package approval

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/countersign/countersign"
)

// Link actions.
const (
	LinkApprove     = "approve"
	LinkDeny        = "deny"
	LinkRespond     = "respond"
	LinkAutoApprove = "auto_approve"
	LinkStop        = "stop"
)

// DecidedByLink is who decided through an e-mailed link: whoever held the
// link, which is all the server knows.
const DecidedByLink = "email link"

// NewLinks draws one 32-byte token per action. It returns the tokens, to
// put in URLs once, and the links to store, which hold only their hashes.
func NewLinks(actions ...string) (map[string]string, []countersign.Link) {
	tokens := make(map[string]string, len(actions))
	links := make([]countersign.Link, 0, len(actions))
	for _, a := range actions {
		b := make([]byte, 32)
		rand.Read(b)
		tok := hex.EncodeToString(b)
		tokens[a] = tok
		links = append(links, countersign.Link{Hash: countersign.HashSecret(tok), Action: a})
	}
	return tokens, links
}

// LinkRequest returns the request a link opens: the token must belong to
// the request of that seed id, for that action. An unknown token, another
// request's token and another action's token are all ENOTFOUND alike.
func (s *Service) LinkRequest(ctx context.Context, seedID, action, token string) (*countersign.Request, error) {
	if len(token) != 64 {
		return nil, linkNotFound()
	}
	r, err := s.store.RequestBySeedID(ctx, seedID)
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		return nil, linkNotFound()
	} else if err != nil {
		return nil, err
	}
	l, err := s.store.Link(ctx, countersign.HashSecret(strings.ToLower(token)))
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		return nil, linkNotFound()
	} else if err != nil {
		return nil, err
	}
	if l.RequestID != r.ID || l.Action != action {
		return nil, linkNotFound()
	}
	return s.expireLazily(ctx, r)
}

// DecideByLink takes the decision a link stands for. The decision is the
// request's first or none, so a link works once and every other link of the
// request dies with it.
func (s *Service) DecideByLink(ctx context.Context, seedID, action, token string, d countersign.DecisionInput) (*countersign.Request, error) {
	r, err := s.LinkRequest(ctx, seedID, action, token)
	if err != nil {
		return nil, err
	}
	d, ok := linkDecision(action, d)
	if !ok {
		return nil, linkNotFound()
	}
	ap := countersign.ApproverPrincipal{Username: DecidedByLink, AccountID: r.AccountID}
	return s.Decide(ctx, ap, r.ID, d)
}

// linkDecision is the decision a link's action stands for, with only the
// details that action may carry.
func linkDecision(action string, d countersign.DecisionInput) (countersign.DecisionInput, bool) {
	switch action {
	case LinkApprove:
		return countersign.DecisionInput{Decision: countersign.DecisionApprove}, true
	case LinkDeny:
		return countersign.DecisionInput{Decision: countersign.DecisionDeny, Text: d.Text}, true
	case LinkRespond:
		return countersign.DecisionInput{Decision: countersign.DecisionRespond, Text: d.Text}, true
	case LinkAutoApprove:
		return countersign.DecisionInput{Decision: countersign.DecisionApprove, AutoApproveMinutes: d.AutoApproveMinutes}, true
	case LinkStop:
		return countersign.DecisionInput{Decision: countersign.DecisionStop, Text: d.Text}, true
	}
	return countersign.DecisionInput{}, false
}

func linkNotFound() error {
	return countersign.Errorf(countersign.ENOTFOUND, "this link is not valid")
}

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

// SeedAgent returns the agent whose designated key made the signature: the
// hex HMAC-SHA256 of the raw body under the key exactly as printed (the
// seed's X-SafeRM-Signature and X-Claude-Signature). The comparison is in
// constant time. Errors: EUNAUTHORIZED.
func (a *Authenticator) SeedAgent(ctx context.Context, body []byte, signature string) (countersign.Agent, error) {
	sig, err := hex.DecodeString(strings.TrimPrefix(strings.TrimSpace(signature), "sha256="))
	if err != nil || len(sig) != sha256.Size {
		return countersign.Agent{}, countersign.Errorf(countersign.EUNAUTHORIZED, "missing or malformed signature")
	}
	keys, err := a.Store.SeedKeys(ctx)
	if err != nil {
		return countersign.Agent{}, err
	}
	if len(keys) == 0 {
		return countersign.Agent{}, countersign.Errorf(countersign.EUNAUTHORIZED, "no agent key is designated for these routes; create one with: countersign key create --seed-hmac")
	}
	aead, err := seedAEAD(ctx, a.Store)
	if err != nil {
		return countersign.Agent{}, err
	}
	for _, k := range keys {
		secret, err := openSeedSecret(aead, k)
		if err != nil {
			return countersign.Agent{}, err
		}
		m := hmac.New(sha256.New, secret)
		m.Write(body)
		if hmac.Equal(m.Sum(nil), sig) {
			return countersign.Agent{KeyID: k.ID, AccountID: k.AccountID, KeyName: k.Name}, nil
		}
	}
	return countersign.Agent{}, countersign.Errorf(countersign.EUNAUTHORIZED, "invalid signature")
}

// SeedRequest returns a request by the id its seed-compatible client chose,
// for the unsigned status routes of the seed's API, which show only its
// status. Errors: ENOTFOUND.
func (s *Service) SeedRequest(ctx context.Context, seedID string) (*countersign.Request, error) {
	r, err := s.store.RequestBySeedID(ctx, seedID)
	if err != nil {
		return nil, err
	}
	return s.expireLazily(ctx, r)
}
