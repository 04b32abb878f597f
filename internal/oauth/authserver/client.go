package authserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/scratchrun/scratchrun/internal/store"
)

// client is a client as op sees it: public (no secret), code flow only,
// JWT access tokens, and redirect URIs matched exactly (op's web type:
// its native type would match a loopback redirect on any port).
type client struct {
	id           string
	name         string
	redirectURIs []string
	grantTypes   []oidc.GrantType
	loginURL     func(string) string
	scope        string
	idTTL        time.Duration
}

var _ op.Client = (*client)(nil)

func (c *client) GetID() string                       { return c.id }
func (c *client) RedirectURIs() []string              { return c.redirectURIs }
func (c *client) PostLogoutRedirectURIs() []string    { return nil }
func (c *client) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c *client) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodNone }
func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *client) GrantTypes() []oidc.GrantType        { return c.grantTypes }
func (c *client) LoginURL(id string) string           { return c.loginURL(id) }
func (c *client) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }
func (c *client) IDTokenLifetime() time.Duration      { return c.idTTL }
func (c *client) DevMode() bool                       { return false }
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) IsScopeAllowed(scope string) bool     { return scope == c.scope }
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *client) ClockSkew() time.Duration             { return 0 }

// clients finds a client by its id: a URL with a path is a client ID
// metadata document, anything else a registered client.
type clients struct {
	cfg      Config
	loginURL func(string) string
	docs     *documentCache
}

func newClients(cfg Config, loginURL func(string) string) *clients {
	return &clients{cfg: cfg, loginURL: loginURL, docs: newDocumentCache(cfg.MetadataClient)}
}

// errUnknownClient is a client id that names no client.
var errUnknownClient = errors.New("unknown client")

func (cs *clients) get(ctx context.Context, id string) (*client, error) {
	if isMetadataURL(id) {
		m, err := cs.docs.get(ctx, id)
		if err != nil {
			return nil, err
		}
		return cs.fromMetadata(id, m), nil
	}
	rec, err := cs.cfg.State.OAuthClient(ctx, id)
	if errors.Is(err, store.ErrOAuthNotFound) {
		return nil, errUnknownClient
	}
	if err != nil {
		return nil, err
	}
	var m oauthex.ClientRegistrationMetadata
	if err := json.Unmarshal([]byte(rec.Metadata), &m); err != nil {
		return nil, fmt.Errorf("client %s: %w", id, err)
	}
	return cs.fromMetadata(id, &m), nil
}

func (cs *clients) fromMetadata(id string, m *oauthex.ClientRegistrationMetadata) *client {
	c := &client{
		id: id, name: m.ClientName, redirectURIs: m.RedirectURIs, loginURL: cs.loginURL,
		scope: cs.cfg.Scope, idTTL: cs.cfg.AccessTokenTTL,
	}
	for _, g := range m.GrantTypes {
		c.grantTypes = append(c.grantTypes, oidc.GrantType(g))
	}
	if len(c.grantTypes) == 0 {
		c.grantTypes = []oidc.GrantType{oidc.GrantTypeCode}
	}
	return c
}

// checkMetadata checks what both ways of registering must give: redirect
// URIs that are https, or http on a loopback host; a public client of the
// code flow. It returns the RFC 7591 error code and a description.
func checkMetadata(m *oauthex.ClientRegistrationMetadata) (code, desc string) {
	if len(m.RedirectURIs) == 0 {
		return "invalid_redirect_uri", "redirect_uris is required"
	}
	if len(m.RedirectURIs) > 10 {
		return "invalid_redirect_uri", "at most 10 redirect_uris"
	}
	for _, u := range m.RedirectURIs {
		if why := badRedirect(u); why != "" {
			return "invalid_redirect_uri", why
		}
	}
	if len(m.ClientName) > 200 {
		return "invalid_client_metadata", "client_name is longer than 200 bytes"
	}
	if m.TokenEndpointAuthMethod != "" && m.TokenEndpointAuthMethod != "none" {
		return "invalid_client_metadata", "token_endpoint_auth_method must be none: this server has public clients only, with PKCE"
	}
	for _, g := range m.GrantTypes {
		if g != string(oidc.GrantTypeCode) && g != string(oidc.GrantTypeRefreshToken) {
			return "invalid_client_metadata", "grant_types may be authorization_code and refresh_token only"
		}
	}
	for _, r := range m.ResponseTypes {
		if r != string(oidc.ResponseTypeCode) {
			return "invalid_client_metadata", "response_types may be code only"
		}
	}
	return "", ""
}

// badRedirect says why u may not be a redirect URI ("" if it may): MCP
// wants https or a loopback http one, and OAuth 2.1 an absolute URI with
// no fragment.
func badRedirect(u string) string {
	if len(u) > 2000 {
		return "a redirect URI is longer than 2000 bytes"
	}
	p, err := url.Parse(u)
	if err != nil || !p.IsAbs() || p.Host == "" {
		return "a redirect URI is not an absolute URL"
	}
	if p.Fragment != "" || strings.Contains(u, "#") {
		return "a redirect URI has a fragment"
	}
	if p.User != nil {
		return "a redirect URI has user information"
	}
	switch {
	case p.Scheme == "https":
	case p.Scheme == "http" && isLoopbackHost(p.Hostname()):
	default:
		return "a redirect URI must be https, or http on 127.0.0.1, [::1] or localhost"
	}
	return ""
}

// hasRedirect reports whether uri is one of c's, exactly: no port
// wildcard, no prefix (MCP authorization; OAuth 2.1 section 2.3.1).
func (c *client) hasRedirect(uri string) bool { return slices.Contains(c.redirectURIs, uri) }
