package oauth

import (
	"context"
	"errors"
	"time"
)

// Grant is what a checked access token says: who it acts for and until when.
type Grant struct {
	// KeyID is the ScratchRun key (store.Key.ID) the token acts as.
	// Required: a token that maps to no key is not a grant.
	KeyID string
	// Subject and ClientID are the token's sub and client_id, for logs
	// (never the token itself).
	Subject, ClientID string
	// Scopes are the scopes the token was granted.
	Scopes []string
	// Expiry is when the token stops being valid. Required.
	Expiry time.Time
}

// Verifier checks an access token presented to the resource. Every
// implementation checks the token's signature or asks its issuer, its
// expiry, and that its audience is this resource (RFC 8707); a token that
// fails any of them gets an error wrapping ErrInvalidToken.
type Verifier interface {
	Verify(ctx context.Context, token string) (Grant, error)
}

// ErrInvalidToken marks a token that is not valid here: expired, forged,
// for another audience or issuer, revoked, or mapped to no key. It is the
// resource's 401 invalid_token; the wrapping error's text is the
// error_description, so it must never contain the token.
var ErrInvalidToken = errors.New("invalid_token")

// Invalid returns an error wrapping ErrInvalidToken whose text is reason.
func Invalid(reason string) error { return &tokenError{reason} }

type tokenError struct{ reason string }

func (e *tokenError) Error() string { return e.reason }
func (e *tokenError) Unwrap() error { return ErrInvalidToken }
