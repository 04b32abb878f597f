package execapi

import (
	"errors"
	"fmt"
)

// Error codes shared by every front end (HTTP bodies, MCP tool errors, CLI).
const (
	CodeInvalidRequest = "invalid_request"
	CodeAtCapacity     = "at_capacity"
	CodeInternal       = "internal"
)

// ValidationError says which field of a Request is wrong and why. Front ends
// map it to HTTP 400, an MCP tool error or CLI exit status 2; a cluster's
// worker sends it to its front end as it is (its JSON), so that a caller
// reads the same field and words as from a local engine.
type ValidationError struct {
	// Field is the JSON path of the offending field, e.g. "limits.timeout_ms"
	// or `files["/proc/x"]`.
	Field string `json:"field"`
	// Message says what is wrong in words a model can act on.
	Message string `json:"message"`
	// cause is what made the body unreadable, for a front end that tells
	// its own reader's errors apart (http.MaxBytesReader's, say). It
	// stays on the machine that read the body (it is not on the wire).
	cause error
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Message }

// Unwrap returns what made the body unreadable, if that was the error.
func (e *ValidationError) Unwrap() error { return e.cause }

func invalid(field, format string, args ...any) *ValidationError {
	return &ValidationError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// IsValidation reports whether err is (or wraps) a *ValidationError.
func IsValidation(err error) bool {
	var v *ValidationError
	return errors.As(err, &v)
}

// ErrAtCapacity is what a Refusal for capacity or a key's limits unwraps
// to: no sandbox could be had for the call now.
var ErrAtCapacity = errors.New("at capacity: every sandbox slot is busy, retry shortly")
