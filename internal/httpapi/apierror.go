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
)
