package external

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/scratchrun/scratchrun/internal/oauth"
)

// introspection is the RFC 7662 §2.2 answer, with Hydra's token_use.
type introspection struct {
	Active    bool         `json:"active"`
	Scope     scopeList    `json:"scope"`
	ClientID  string       `json:"client_id"`
	Subject   string       `json:"sub"`
	Audience  jwt.Audience `json:"aud"`
	Issuer    string       `json:"iss"`
	Expiry    int64        `json:"exp"`
	NotBefore int64        `json:"nbf"`
	// TokenUse is Ory's word for what kind of token it is; an
	// authorization server that introspects refresh tokens too says
	// "refresh_token" for one, which must not pass as an access token.
	TokenUse string `json:"token_use"`
}

// introspect asks the authorization server about token (RFC 7662), as
// this server's client.
func (v *Verifier) introspect(ctx context.Context, token string) (facts, error) {
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, v.intro, strings.NewReader(form.Encode()))
	if err != nil {
		return facts{}, fmt.Errorf("oauth external: introspection request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	// RFC 6749 §2.3.1: the credentials are form-encoded before Basic.
	req.SetBasicAuth(url.QueryEscape(v.cfg.ClientID), url.QueryEscape(v.cfg.ClientSecret))
	var in introspection
	if _, err := doJSON(v.cfg.HTTPClient, req, &in); err != nil {
		// Not the token's fault: the server is down or refuses us.
		return facts{}, fmt.Errorf("oauth external: introspect at %s: %w", v.intro, err)
	}
	switch {
	case !in.Active:
		return facts{}, oauth.Invalid("the authorization server says the token is not active (expired, revoked or unknown)")
	case in.TokenUse != "" && in.TokenUse != "access_token":
		return facts{}, oauth.Invalid("the token is a " + in.TokenUse + ", not an access token")
	case in.Issuer != "" && in.Issuer != v.cfg.Issuer:
		return facts{}, oauth.Invalid("the token is from another issuer (iss is not " + v.cfg.Issuer + ")")
	}
	return facts{subject: in.Subject, client: in.ClientID, audience: in.Audience, scopes: in.Scope,
		expiry: unixTime(in.Expiry), notBefore: unixTime(in.NotBefore)}, nil
}
