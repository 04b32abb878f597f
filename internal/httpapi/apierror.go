package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// Error codes of the HTTP API beyond those shared in execapi.
const (
	CodeUnauthorized = "unauthorized"
	// CodeInsufficientScope answers an OAuth token without the scopes /mcp
	// needs (403, as RFC 6750 §3.1 names it).
	CodeInsufficientScope = "insufficient_scope"
	CodeBodyTooLarge      = "body_too_large"
	CodeNotFound          = "not_found"
	CodeMethodNotAllowed  = "method_not_allowed"
	CodeMediaType         = "unsupported_media_type"
	// CodeIdempotencyKeyReused answers (409) a repeat of an
	// Idempotency-Key with another request body.
	CodeIdempotencyKeyReused = "idempotency_key_reused"
	// CodeIdempotencyUnknown answers (409) a repeat of an Idempotency-Key
	// whose first request will give no answer: its server stopped mid-run,
	// or its answer was too large to keep. The code may have run; it is
	// never run again.
	CodeIdempotencyUnknown = "idempotency_unknown"
)

// APIError is a non-2xx answer of a ScratchRun server, as the client sees
// it, when it is no refusal (those come back as the server's own
// *execapi.Refusal).
//
// A 400 answer wraps an *execapi.ValidationError (so execapi.IsValidation
// holds) and a 429 answer (from a proxy: the server's own are refusals)
// wraps execapi.ErrAtCapacity, so callers handle a remote server as they
// handle the local engine.
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Code and Message are the server's {"error": {"code", "message"}}.
	Code    string
	Message string
	// Field is the request field a 400 answer names, when it names one.
	Field string
	// RetryAfter is the server's Retry-After, zero when it sent none.
	RetryAfter time.Duration
}

// Error says the status, code and message, and when to retry if the server said.
func (e *APIError) Error() string {
	msg := fmt.Sprintf("scratchrun server: %d %s: %s", e.Status, e.Code, e.Message)
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	return msg
}

// Unwrap lets errors.As find a *execapi.ValidationError in a 400 answer and
// errors.Is find execapi.ErrAtCapacity in a 429 answer.
func (e *APIError) Unwrap() []error {
	switch e.Status {
	case http.StatusBadRequest:
		if e.Field != "" {
			return []error{&execapi.ValidationError{Field: e.Field, Message: strings.TrimPrefix(e.Message, e.Field+": ")}}
		}
		return []error{validationFromMessage(e.Message)}
	case http.StatusTooManyRequests:
		return []error{execapi.ErrAtCapacity}
	}
	return nil
}

// validationFromMessage rebuilds the ValidationError a server sent as its
// Error() text, "field: message", when its document does not name the
// field (a server older than that). A field is a JSON path such as
// limits.timeout_ms, return_files[2] or files["/tmp/a: b"] (quoted parts may
// hold anything, so the text is parsed, not split at the first colon).
func validationFromMessage(msg string) *execapi.ValidationError {
	if n := fieldPrefixLen(msg); n > 0 && strings.HasPrefix(msg[n:], ": ") {
		return &execapi.ValidationError{Field: msg[:n], Message: msg[n+2:]}
	}
	return &execapi.ValidationError{Field: "request", Message: msg}
}

// fieldPrefixLen returns the length of the JSON path at the start of s, or 0.
func fieldPrefixLen(s string) int {
	i := 0
	for i < len(s) && (s[i] == '_' || s[i] == '.' || s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z' || s[i] >= '0' && s[i] <= '9') {
		i++
	}
	if i == 0 {
		return 0
	}
	for i < len(s) && s[i] == '[' {
		j := i + 1
		if j < len(s) && s[j] == '"' {
			q, err := strconv.QuotedPrefix(s[j:])
			if err != nil {
				return 0
			}
			j += len(q)
		} else {
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
		}
		if j >= len(s) || s[j] != ']' || j == i+1 {
			return 0
		}
		i = j + 1
	}
	return i
}
