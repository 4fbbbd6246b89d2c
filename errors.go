package countersign

import (
	"errors"
	"fmt"
	"time"
)

// Error codes. Each maps to one HTTP status in the server.
const (
	EINVALID      = "invalid"       // bad input: 400
	EUNAUTHORIZED = "unauthorized"  // missing or bad credential: 401
	EFORBIDDEN    = "forbidden"     // the wrong kind of credential: 403
	ENOTFOUND     = "not_found"     // unknown, or not the caller's: 404
	ECONFLICT     = "conflict"      // the state does not allow it: 409
	ETOOLARGE     = "too_large"     // body too large: 413
	ELIMIT        = "limited"       // a limit was reached: 429
	EUNAVAILABLE  = "unavailable"   // shutting down: 503
	EINTERNAL     = "internal"      // a fault of ours: 500
	EMISDIRECTED  = "misdirected"   // wrong Host: 421
	EEXPIRED      = "expired"       // the request expired: 409
	EUNSUPPORTED  = "not_supported" // method or media type: 405/415
	ETIMEOUT      = "timeout"       // a body sent too slowly: 408
)

// Error is an application error: a code from the catalogue and a message
// fit for the caller. Internal details never go into Message.
type Error struct {
	Code    string
	Message string
	// RetryAfter, for ELIMIT, says when trying again can succeed.
	RetryAfter time.Duration
}

// Error implements the error interface.
func (e *Error) Error() string {
	return fmt.Sprintf("countersign error: code=%s message=%s", e.Code, e.Message)
}

// Errorf returns an *Error with the code and a formatted message.
func Errorf(code string, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of an application error, EINTERNAL for any
// other error, and "" for nil.
func ErrorCode(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the message of an application error, or a generic
// message for any other error so that internals never leak.
func ErrorMessage(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Message
	}
	return "Internal error."
}

// ErrReferenceTaken is the conflict of a new request whose reference code
// a live request of its account already has; the caller draws another.
var ErrReferenceTaken = &Error{Code: ECONFLICT, Message: "the reference code is taken"}

// NotFound is the ENOTFOUND of a thing that does not exist, or not for the
// caller: "request", "approver or account".
func NotFound(what string) *Error {
	return Errorf(ENOTFOUND, "%s not found", what)
}

// ErrExists is the conflict of a new thing whose id is taken: "request",
// "client", "approver token", "auto-approve window".
func ErrExists(what string) *Error {
	return Errorf(ECONFLICT, "%s already exists", what)
}

// ErrAlreadyRevoked is the conflict of revoking what is revoked: "agent
// key", "approver token", "the grant".
func ErrAlreadyRevoked(what string) *Error {
	return Errorf(ECONFLICT, "%s is already revoked", what)
}
