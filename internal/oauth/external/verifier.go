package external

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/scratchrun/scratchrun/internal/oauth"
	"github.com/scratchrun/scratchrun/internal/store"
)

// Verifier checks access tokens from one authorization server and maps
// each to the ScratchRun key it acts as. It is an oauth.Verifier.
type Verifier struct {
	cfg   Config
	now   func() time.Time
	keys  *keySet // JWT mode
	intro string  // introspection mode: the endpoint
}

var _ oauth.Verifier = (*Verifier)(nil)

// New checks cfg, reads the authorization server's metadata and, for JWTs,
// its keys, so that a wrong issuer, an unreachable server or a rule naming
// no active key fails at start, not at a client's first request.
func New(ctx context.Context, cfg Config) (*Verifier, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = defaultHTTPClient()
	}
	if cfg.ClockSkew == 0 {
		cfg.ClockSkew = defaultClockSkew
	}
	for _, r := range cfg.Rules {
		if _, err := cfg.Keys.ActiveKey(ctx, r.Key); err != nil {
			return nil, fmt.Errorf("oauth external: Rules: %s:%s names key %q: %w", r.Claim, r.Value, r.Key, err)
		}
	}
	md, err := discover(ctx, cfg.HTTPClient, cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("oauth external: Issuer: %w", err)
	}
	v := &Verifier{cfg: cfg, now: time.Now}
	if cfg.ClientID != "" {
		v.intro = cfg.IntrospectionURL
		if v.intro == "" {
			v.intro = md.IntrospectionEndpoint
		}
		if v.intro == "" {
			return nil, fmt.Errorf("oauth external: ClientID asks for introspection, but issuer %s publishes no introspection_endpoint: set IntrospectionURL", cfg.Issuer)
		}
		return v, nil
	}
	if md.JWKSURI == "" {
		return nil, fmt.Errorf("oauth external: issuer %s publishes no jwks_uri, so its tokens cannot be checked as JWTs: set ClientID (and ClientSecret) to introspect them", cfg.Issuer)
	}
	v.keys = newKeySet(cfg.HTTPClient, md.JWKSURI, v.clock)
	v.keys.mu.Lock()
	err = v.keys.fetch(ctx)
	v.keys.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("oauth external: Issuer: %w", err)
	}
	return v, nil
}

func (v *Verifier) clock() time.Time { return v.now() }

// facts are what either way of checking learns of a token.
type facts struct {
	subject, client string
	audience        []string
	scopes          []string
	expiry          time.Time
	notBefore       time.Time // zero: none
}

// Verify checks token (its signature, or the server's word that it is
// active; its issuer, times, audience and scope) and returns the grant of
// the key its rules name. A refusal wraps oauth.ErrInvalidToken and says
// why without quoting the token; any other error is this server's
// trouble (the authorization server or the key store unreachable).
func (v *Verifier) Verify(ctx context.Context, token string) (oauth.Grant, error) {
	var f facts
	var err error
	if v.keys != nil {
		f, err = v.verifyJWT(ctx, token)
	} else {
		f, err = v.introspect(ctx, token)
	}
	if err != nil {
		return oauth.Grant{}, err
	}
	now := v.now()
	switch {
	case f.expiry.IsZero():
		return oauth.Grant{}, oauth.Invalid("the token has no expiry (exp)")
	case now.Add(-v.cfg.ClockSkew).After(f.expiry):
		return oauth.Grant{}, oauth.Invalid("the token has expired")
	case !f.notBefore.IsZero() && now.Add(v.cfg.ClockSkew).Before(f.notBefore):
		return oauth.Grant{}, oauth.Invalid("the token is not valid yet (nbf)")
	case !oauthex.MatchesResource(f.audience, v.cfg.Resource):
		return oauth.Grant{}, oauth.Invalid("the token is not for this resource (its audience does not name " + v.cfg.Resource + ")")
	case v.cfg.Scope != "" && !slices.Contains(f.scopes, v.cfg.Scope):
		return oauth.Grant{}, oauth.Invalid("the token lacks the scope " + v.cfg.Scope)
	}
	name, ok := keyFor(v.cfg.Rules, f.subject, f.client)
	if !ok {
		if f.subject == "" && f.client == "" {
			return oauth.Grant{}, oauth.Invalid("the token names no subject or client")
		}
		return oauth.Grant{}, oauth.Invalid("no ScratchRun key for this token's subject or client")
	}
	key, err := v.cfg.Keys.ActiveKey(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return oauth.Grant{}, oauth.Invalid("the ScratchRun key for this token's subject or client is revoked")
	}
	if err != nil {
		return oauth.Grant{}, fmt.Errorf("oauth external: find the key for a token: %w", err)
	}
	return oauth.Grant{KeyID: key.ID, Subject: f.subject, ClientID: f.client, Scopes: f.scopes, Expiry: f.expiry}, nil
}

// scopeList reads a scope claim: a space-separated string (RFC 9068's
// "scope", RFC 7662) or a list (the "scp" of Hydra, Okta, Azure).
type scopeList []string

func (s *scopeList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = strings.Fields(one)
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("a scope claim is neither a string nor a list of strings")
	}
	*s = many
	return nil
}

// union is the scopes of both claims, each once.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
