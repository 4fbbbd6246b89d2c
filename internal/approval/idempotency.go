package approval

import (
	"context"

	"github.com/countersign/countersign"
)

// Idempotent returns the change the principal made with key within the
// last countersign.IdempotencyWindow, for its answer to be given again.
// Errors: ENOTFOUND, also when the store keeps no keys.
func (s *Service) Idempotent(ctx context.Context, principal, key string) (*countersign.IdempotentResult, error) {
	is, ok := s.store.(countersign.IdempotencyStore)
	if !ok {
		return nil, countersign.NotFound("idempotency key")
	}
	return is.Idempotent(ctx, principal, key, s.clock.Now().Add(-countersign.IdempotencyWindow))
}
