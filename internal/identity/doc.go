// Package identity holds who may act and how they prove it: agent keys and
// their seed-route signatures, approver tokens, sign-in with a password
// (argon2id, bounded by hash slots) or a passkey, sessions, the passkey
// ceremonies (registration, enrolment, sign-in, consent and the step-up of
// one decision), OAuth clients, grants and their tokens, and the
// administration of accounts and approvers. It changes no request: a
// request's life is internal/approval's, which takes a step-up's proof as
// a countersign.Verification that this package makes.
package identity
