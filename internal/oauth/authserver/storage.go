package authserver

import (
	"context"

	"github.com/scratchrun/scratchrun/internal/store"
)

// Storage is where the server keeps what must outlive a request and be
// shared by every front end: registered clients, authorization requests
// and their codes, refresh tokens (by hash) and the signing key.
// *store.Store implements it; its methods' contracts (ErrOAuthNotFound,
// ErrOAuthUsed, ErrOAuthFull, codes and refresh tokens taken once) are
// documented there.
type Storage interface {
	AddOAuthClient(ctx context.Context, c store.OAuthClient, max int) error
	OAuthClient(ctx context.Context, id string) (store.OAuthClient, error)

	PutOAuthAuthRequest(ctx context.Context, r store.OAuthAuthRequest) error
	CountOAuthAuthRequests(ctx context.Context) (int, error)
	OAuthAuthRequest(ctx context.Context, id string) (store.OAuthAuthRequest, error)
	SetOAuthCode(ctx context.Context, id, codeHash string) error
	TakeOAuthCode(ctx context.Context, codeHash string) (store.OAuthAuthRequest, error)
	DeleteOAuthAuthRequest(ctx context.Context, id string) error

	AddOAuthRefresh(ctx context.Context, r store.OAuthRefresh) error
	OAuthRefresh(ctx context.Context, hash string) (store.OAuthRefresh, error)
	TakeOAuthRefresh(ctx context.Context, hash string) (store.OAuthRefresh, error)
	RevokeOAuthGrant(ctx context.Context, family string) error

	OAuthSigningKey(ctx context.Context, candidate store.OAuthSigningKey) (store.OAuthSigningKey, error)
}

// KeyAuthority is what the server needs of ScratchRun's API keys: the
// consent page authenticates the key a person pastes, and every token
// check and refresh looks the key up, so that revoking it ends its tokens.
// *store.Store implements it.
type KeyAuthority interface {
	// Authenticate returns the active key whose secret this is.
	Authenticate(ctx context.Context, secret string) (store.Key, error)
	// KeyByID returns the key with this id, revoked or not.
	KeyByID(ctx context.Context, id string) (store.Key, error)
}

var (
	_ Storage      = (*store.Store)(nil)
	_ KeyAuthority = (*store.Store)(nil)
)
