package oauthclient

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"

	"golang.org/x/oauth2"
)

// Grant is what is kept of a sign-in between runs: enough to refresh the
// access token at the token endpoint that issued it, for the client the
// authorization server registered, and nothing that is only valid for
// minutes (the access token stays in memory).
type Grant struct {
	// Issuer is the authorization server's issuer identifier (RFC 8414).
	// A grant is only used while the resource still names this issuer
	// (clients key credentials by issuer: MCP 2026-07-28).
	Issuer string `json:"issuer"`
	// Resource is the MCP endpoint the tokens are for (RFC 8707).
	Resource string `json:"resource"`
	// ClientID and ClientSecret are the client's registration at Issuer
	// (ClientSecret is empty for the public client DCR gives a native app).
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret,omitempty"`
	// TokenURL is the token endpoint the refresh token goes to: the one it
	// came from, never one discovered later.
	TokenURL string `json:"token_url"`
	// AuthStyle is how the client authenticates there (oauth2.AuthStyle).
	AuthStyle oauth2.AuthStyle `json:"auth_style,omitempty"`
	// RefreshToken is the newest refresh token (rotated on every refresh).
	RefreshToken string `json:"refresh_token"`
	// Scopes are the scopes the sign-in asked for.
	Scopes []string `json:"scopes,omitempty"`
}

// ErrNoGrant is Load's answer when nothing usable is stored.
var ErrNoGrant = errors.New("oauthclient: no stored grant")

// valid reports whether g can refresh a token at all.
func (g *Grant) valid() bool {
	return g.Issuer != "" && g.Resource != "" && g.ClientID != "" && g.TokenURL != "" && g.RefreshToken != ""
}

// config is the oauth2 configuration that refreshes g's token.
func (g *Grant) config() *oauth2.Config {
	return &oauth2.Config{
		ClientID:     g.ClientID,
		ClientSecret: g.ClientSecret,
		Endpoint:     oauth2.Endpoint{TokenURL: g.TokenURL, AuthStyle: g.AuthStyle},
		Scopes:       g.Scopes,
	}
}

// entryName names the stored entry of resource: the same in the keychain
// and as a file name, and free of anything a file system or a keychain
// could choke on. One entry per resource (not per issuer and resource) so
// that forgetting a server needs no network to learn its issuer; the
// entry's Issuer is checked on Load, and a sign-in at a new issuer replaces
// it.
func entryName(resource string) string {
	sum := sha256.Sum256([]byte(resource))
	return hex.EncodeToString(sum[:])
}

// Store keeps grants between runs.
type Store interface {
	// Load returns the grant for resource at issuer, or ErrNoGrant (also
	// when the stored one is for another issuer).
	Load(issuer, resource string) (*Grant, error)
	// Save keeps g, replacing what was stored for g.Resource.
	Save(g *Grant) error
	// Forget removes what is stored for resource; nothing stored is no
	// error.
	Forget(resource string) error
}

// match is Load's check of a decoded entry.
func match(g *Grant, issuer, resource string) (*Grant, error) {
	if g.Resource != resource || g.Issuer != issuer || !g.valid() {
		return nil, ErrNoGrant
	}
	return g, nil
}
