package external

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/scratchrun/scratchrun/internal/oauth"
)

// signingAlgs are the asymmetric algorithms a token may be signed with:
// never "none", and never an HMAC, whose key a resource server would have
// to share with the issuer (and which a public key must not verify).
var signingAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// accessClaims are the claims of a JWT access token (RFC 9068) that the
// verifier reads.
type accessClaims struct {
	jwt.Claims
	Scope    scopeList `json:"scope"`
	Scp      scopeList `json:"scp"`
	ClientID string    `json:"client_id"`
	AZP      string    `json:"azp"`
}

// verifyJWT checks token's signature against the issuer's keys and its
// issuer, and returns its claims for the checks both ways share.
func (v *Verifier) verifyJWT(ctx context.Context, token string) (facts, error) {
	if strings.Count(token, ".") != 2 {
		return facts{}, oauth.Invalid("the token is not a JWT (this server checks JWTs; opaque tokens need introspection)")
	}
	// The library's error is not passed on: it may quote parts of the token.
	tok, err := jwt.ParseSigned(token, signingAlgs)
	if err != nil {
		return facts{}, oauth.Invalid("the token is not a JWT signed with an asymmetric algorithm (RS, PS, ES or EdDSA)")
	}
	if len(tok.Headers) != 1 {
		return facts{}, oauth.Invalid("the token has more than one signature")
	}
	h := tok.Headers[0]
	keys, err := v.keys.candidates(ctx, h.KeyID, h.Algorithm)
	var unknown errUnknownKey
	if errors.As(err, &unknown) {
		return facts{}, oauth.Invalid("the token is " + unknown.Error())
	}
	if err != nil {
		return facts{}, err
	}
	var key any
	for _, k := range keys {
		if tok.Claims(k.Key) == nil {
			key = k.Key
			break
		}
	}
	if key == nil {
		return facts{}, oauth.Invalid("the token's signature does not verify with the issuer's keys")
	}
	var c accessClaims
	if err := tok.Claims(key, &c); err != nil {
		return facts{}, oauth.Invalid("the token's claims are malformed")
	}
	if c.Issuer != v.cfg.Issuer {
		return facts{}, oauth.Invalid("the token is from another issuer (iss is not " + v.cfg.Issuer + ")")
	}
	f := facts{subject: c.Subject, client: c.ClientID, audience: c.Audience, scopes: union(c.Scope, c.Scp)}
	if f.client == "" {
		f.client = c.AZP
	}
	if c.Expiry != nil {
		f.expiry = c.Expiry.Time()
	}
	if c.NotBefore != nil {
		f.notBefore = c.NotBefore.Time()
	}
	return f, nil
}

// unixTime is a NumericDate of RFC 7662 (seconds), zero when absent.
func unixTime(s int64) time.Time {
	if s == 0 {
		return time.Time{}
	}
	return time.Unix(s, 0)
}
