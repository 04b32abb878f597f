package httpapi

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
	// CodeNotReady answers /readyz when the server cannot run code now.
	CodeNotReady = "not_ready"
	// CodeIdempotencyKeyReused answers (409) a repeat of an
	// Idempotency-Key with another request body.
	CodeIdempotencyKeyReused = "idempotency_key_reused"
	// CodeIdempotencyUnknown answers (409) a repeat of an Idempotency-Key
	// whose first request will give no answer: its server stopped mid-run,
	// or its answer was too large to keep. The code may have run; it is
	// never run again.
	CodeIdempotencyUnknown = "idempotency_unknown"
)
