package external

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/scratchrun/scratchrun/internal/store"
)

// Config is an operator's authorization server, as the lead's settings
// fill it in.
type Config struct {
	// Issuer is the authorization server's issuer URL, exactly as its
	// tokens' iss claim and its metadata give it. Its metadata is found
	// at the RFC 8414 well-known path, then by OpenID Connect discovery.
	// Required.
	Issuer string
	// Resource is this server's /mcp URL (its RFC 9728 resource). A
	// token's audience must name it (oauthex.MatchesResource: a trailing
	// slash aside, exactly). Required.
	Resource string
	// Scope is a scope every token must have; "" requires none.
	Scope string
	// ClientID and ClientSecret, when ClientID is set, are this server's
	// credentials at the authorization server: tokens are then checked by
	// RFC 7662 introspection (client_secret_basic), so opaque tokens work
	// and a token the server revoked is refused at once. With no ClientID
	// tokens must be JWTs, checked against the server's published keys
	// (jwks_uri).
	ClientID, ClientSecret string
	// IntrospectionURL overrides the metadata's introspection_endpoint,
	// for servers that do not publish it (Ory Hydra serves it on its
	// admin port only). Only with ClientID.
	IntrospectionURL string
	// Rules map a token to the ScratchRun key it acts as (see ParseRules
	// and Rule); a token no rule maps is refused. Required.
	Rules []Rule
	// Keys finds the key a rule names; *store.Store is one. Required.
	Keys KeyFinder
	// HTTPClient talks to the authorization server. The default has
	// bounded timeouts (10 s a request).
	HTTPClient *http.Client
	// ClockSkew is how far this host's clock and the authorization
	// server's may disagree when exp and nbf are checked (default 30 s).
	ClockSkew time.Duration
}

// KeyFinder finds an active ScratchRun key by id or name, failing (with
// store.ErrNotFound) for one that does not exist or is revoked.
type KeyFinder interface {
	ActiveKey(ctx context.Context, idOrName string) (store.Key, error)
}

// defaultClockSkew tolerates ordinary NTP drift without keeping an expired
// token alive for long.
const defaultClockSkew = 30 * time.Second

// check finds what is missing or malformed, naming the field.
func (c *Config) check() error {
	if c.Issuer == "" {
		return errors.New("oauth external: Issuer is required (the authorization server's issuer URL)")
	}
	if _, err := wellKnownURLs(c.Issuer); err != nil {
		return fmt.Errorf("oauth external: Issuer: %w", err)
	}
	u, err := url.Parse(c.Resource)
	switch {
	case c.Resource == "":
		return errors.New("oauth external: Resource is required (this server's /mcp URL)")
	case err != nil || !u.IsAbs() || u.Host == "" || u.Fragment != "":
		return fmt.Errorf("oauth external: Resource %q is not an absolute URL without a fragment", c.Resource)
	case c.ClientID == "" && (c.ClientSecret != "" || c.IntrospectionURL != ""):
		return errors.New("oauth external: ClientSecret and IntrospectionURL need ClientID (introspection); leave all three empty to check JWTs")
	case len(c.Rules) == 0:
		return errors.New("oauth external: Rules is empty: no token could map to a ScratchRun key")
	case c.Keys == nil:
		return errors.New("oauth external: Keys is required (the key store)")
	case c.ClockSkew < 0:
		return errors.New("oauth external: ClockSkew is negative")
	}
	return nil
}

// defaultHTTPClient bounds every step, so an authorization server that
// stops answering delays a request by seconds, not forever.
func defaultHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = 5 * time.Second
	t.ResponseHeaderTimeout = 10 * time.Second
	return &http.Client{Transport: t, Timeout: 10 * time.Second}
}
