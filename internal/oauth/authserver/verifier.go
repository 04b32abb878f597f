package authserver

import (
	"context"
	"errors"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/scratchrun/scratchrun/internal/oauth"
	"github.com/scratchrun/scratchrun/internal/store"
)

// verifier checks the server's own access tokens. op's check is the
// signature (by the key set), iss and exp; the audience (RFC 8707), that
// it is an access token and not an ID token signed by the same key, and
// that its key is still active are checked here.
type verifier struct {
	cfg Config
	v   *op.AccessTokenVerifier
}

func newVerifier(cfg Config, st *opStorage) *verifier {
	return &verifier{cfg: cfg, v: op.NewAccessTokenVerifier(cfg.Issuer, &op.OpenIDKeySet{Storage: st},
		op.WithSupportedAccessTokenSigningAlgorithms("ES256"))}
}

// Verify implements oauth.Verifier. Its errors never quote the token.
func (v *verifier) Verify(ctx context.Context, token string) (oauth.Grant, error) {
	claims, err := op.VerifyAccessToken[*oidc.AccessTokenClaims](ctx, token, v.v)
	switch {
	case err == nil:
	case errors.Is(err, oidc.ErrExpired):
		return oauth.Grant{}, oauth.Invalid("the token has expired")
	case errors.Is(err, oidc.ErrIssuerInvalid):
		return oauth.Grant{}, oauth.Invalid("the token is from another issuer")
	default:
		return oauth.Grant{}, oauth.Invalid("the token is not one this server signed")
	}
	if !strings.HasPrefix(claims.JWTID, accessTokenPrefix) {
		return oauth.Grant{}, oauth.Invalid("the token is not an access token")
	}
	if !oauthex.MatchesResource(claims.Audience, v.cfg.Resource) {
		return oauth.Grant{}, oauth.Invalid("the token is for another resource")
	}
	if claims.Subject == "" {
		return oauth.Grant{}, oauth.Invalid("the token names no key")
	}
	k, err := v.cfg.Keys.KeyByID(ctx, claims.Subject)
	if err != nil || !k.Active() {
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return oauth.Grant{}, err
		}
		return oauth.Grant{}, oauth.Invalid("the token's API key is revoked")
	}
	return oauth.Grant{
		KeyID: k.ID, Subject: claims.Subject, ClientID: claims.ClientID,
		Scopes: claims.Scopes, Expiry: claims.Expiration.AsTime(),
	}, nil
}
