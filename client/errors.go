package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// Error codes of the API's error document ({"error": {"code", ...}}) that
// a program may act on; docs/api.md lists them all.
const (
	CodeInvalidRequest       = execapi.CodeInvalidRequest
	CodeUnauthorized         = "unauthorized"
	CodeBodyTooLarge         = "body_too_large"
	CodeNotFound             = "not_found"
	CodeAtCapacity           = execapi.CodeAtCapacity
	CodeRateLimited          = execapi.CodeRateLimited
	CodeConcurrencyLimited   = execapi.CodeConcurrencyLimit
	CodeDraining             = execapi.CodeDraining
	CodeNoWorkers            = execapi.CodeNoWorkers
	CodeWorkerLost           = execapi.CodeWorkerLost
	CodeInternal             = execapi.CodeInternal
	CodeIdempotencyKeyReused = "idempotency_key_reused"
	CodeIdempotencyUnknown   = "idempotency_unknown"
)

// Sentinels for errors.Is: an *APIError matches the ones its answer stands
// for, so that a program branches on what happened without reading codes.
var (
	// ErrInvalidRequest: the server refused the request itself (400);
	// APIError.Field names the field at fault.
	ErrInvalidRequest = errors.New("scratchrun: invalid request")
	// ErrUnauthorized: the server did not accept the API key (401).
	ErrUnauthorized = errors.New("scratchrun: unauthorized")
	// ErrRefused: the server refused the call before any of it ran (a
	// capacity or key limit, draining): a retry, after RetryAfter, is safe.
	ErrRefused = errors.New("scratchrun: refused before the run")
	// ErrWorkerLost: the cluster lost the worker running the call; the
	// code may have run.
	ErrWorkerLost = errors.New("scratchrun: worker lost, the code may have run")
	// ErrIdempotencyUnknown: the first request with this Idempotency-Key
	// ended without an answer (its server stopped); the code may have run.
	ErrIdempotencyUnknown = errors.New("scratchrun: idempotent request ended without an answer, the code may have run")
)

// APIError is an answer of the server other than 2xx, or an error event of
// a stream: the API's error document, its HTTP status and Retry-After.
type APIError struct {
	// Status is the HTTP status code (that of the stream, 200, for an
	// error event).
	Status int
	// Code and Message are the document's; Code is one of the Code
	// constants (or a newer server's own).
	Code    string
	Message string
	// Field is the request field (or header, "Idempotency-Key") at fault.
	Field string
	// Reason is a refusal's reason ("key_concurrency", "memory", ...),
	// empty for other errors; Limit the key's limit it hit, if any.
	Reason string
	Limit  int
	// RetryAfter is the server's Retry-After, zero when it sent none.
	RetryAfter time.Duration
	// Ended is how and when a session ended, in the answer to a use of
	// it after (CodeSessionEnded).
	Ended *execapi.SessionEnd
}

// Error says the status, code and message, and when to retry if the server said.
func (e *APIError) Error() string {
	msg := fmt.Sprintf("scratchrun server: %d %s: %s", e.Status, e.Code, e.Message)
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	return msg
}

// Is matches the sentinels the answer stands for.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrInvalidRequest:
		return e.Status == http.StatusBadRequest
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized
	case ErrRefused:
		return e.refused()
	case ErrWorkerLost:
		return e.Code == CodeWorkerLost
	case ErrIdempotencyUnknown:
		return e.Code == CodeIdempotencyUnknown
	}
	return false
}

// refused reports whether the server said nothing of the call ran: every
// 429, and a 503 that names a refusal's reason (one without a reason, from
// a draining server, may have ended a run that had begun).
func (e *APIError) refused() bool {
	if e.Status == http.StatusTooManyRequests {
		return true
	}
	return e.Status == http.StatusServiceUnavailable && e.Reason != ""
}

// Unwrap gives this module's own front ends (which hold the client as the
// engine's stand-in) the contract's errors as the server had them: a
// refusal, a validation error naming its field, a lost worker. Programs
// outside the module read the fields instead.
func (e *APIError) Unwrap() []error {
	if e.Code == CodeWorkerLost {
		return []error{&execapi.WorkerLostError{Why: "reported by the server: " + e.Message}}
	}
	if err := e.sessionError(); err != nil {
		return []error{err}
	}
	if r := e.refusal(); r != nil {
		return []error{r}
	}
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

// refusal rebuilds the server's refusal: the reason its document names, or,
// from a server that names none (one older than reasons), the one its 429's
// code stands for. Nil when the answer is no refusal.
func (e *APIError) refusal() *execapi.Refusal {
	reason := execapi.RefusalReason(e.Reason)
	if reason == "" && e.Status == http.StatusTooManyRequests {
		switch e.Code {
		case CodeAtCapacity:
			reason = execapi.RefusedAtCapacity
		case CodeRateLimited:
			reason = execapi.RefusedKeyRate
		case CodeConcurrencyLimited:
			reason = execapi.RefusedKeyConcurrency
		}
	}
	if reason == "" {
		return nil
	}
	r := &execapi.Refusal{Reason: reason, RetryAfter: e.RetryAfter, Limit: e.Limit, Field: e.Field}
	if e.Field != "" {
		r.Detail = strings.TrimPrefix(e.Message, e.Field+": ")
	}
	return r
}

// errorDocument is the API's error document, as the server writes it
// (httpapi.ErrorDocument; this package does not import the server).
type errorDocument struct {
	Error struct {
		Code    string              `json:"code"`
		Message string              `json:"message"`
		Reason  string              `json:"reason"`
		Field   string              `json:"field"`
		Limit   int                 `json:"limit"`
		Ended   *execapi.SessionEnd `json:"ended"`
	} `json:"error"`
}

// maxErrorBytes bounds an error document the client reads.
const maxErrorBytes = 1 << 20

// readError turns a non-2xx answer into an *APIError, also when its body is
// not the API's error document (a proxy's HTML page, say).
func readError(resp *http.Response) *APIError {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	e := errorFrom(resp.StatusCode, data)
	e.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	return e
}

// errorFrom reads an error document answered with status.
func errorFrom(status int, data []byte) *APIError {
	e := &APIError{Status: status}
	var doc errorDocument
	if json.Unmarshal(data, &doc) != nil || doc.Error.Code == "" && doc.Error.Message == "" {
		e.Code = codeForStatus(status)
		e.Message = strings.TrimSpace(http.StatusText(status) + ": " + truncate(strings.TrimSpace(string(data)), 200))
		return e
	}
	d := doc.Error
	e.Code, e.Message, e.Field, e.Reason, e.Limit, e.Ended = d.Code, d.Message, d.Field, d.Reason, d.Limit, d.Ended
	return e
}

// codeForStatus guesses the API's code when a body did not carry one.
func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return CodeInvalidRequest
	case http.StatusUnauthorized:
		return CodeUnauthorized
	case http.StatusRequestEntityTooLarge:
		return CodeBodyTooLarge
	case http.StatusTooManyRequests:
		return CodeAtCapacity
	case http.StatusServiceUnavailable:
		return CodeDraining
	case http.StatusNotFound:
		return CodeNotFound
	}
	return CodeInternal
}

// parseRetryAfter reads delay-seconds or an HTTP date; zero when absent or bad.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now).Round(time.Second)
	}
	return 0
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

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
