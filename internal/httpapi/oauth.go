package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/scratchrun/scratchrun/internal/oauth"
	"github.com/scratchrun/scratchrun/internal/store"
)

// OAuth makes /mcp an OAuth 2.1 resource server (the MCP authorization
// specification): besides API keys it takes access tokens, which act as the
// ScratchRun key their Verifier names, so the key's limits, usage and
// revocation apply to them unchanged. The REST API keeps API keys only: a
// token's audience is /mcp, and passing it on elsewhere is what the
// specification forbids.
type OAuth struct {
	// Resource is /mcp's canonical URI as clients reach it
	// (https://host/mcp): the audience tokens must name, and where the
	// protected-resource metadata (RFC 9728) is served. Required.
	Resource string
	// AuthorizationServers are the issuers tokens come from, as the
	// metadata names them. Required.
	AuthorizationServers []string
	// Scopes are the scopes a token must carry, named in every challenge
	// and in the metadata (clients ask for what they are told).
	Scopes []string
	// Verifier checks tokens. Required.
	Verifier oauth.Verifier
	// Routes are more handlers mounted at the server root outside the key
	// check, by ServeMux pattern: the built-in authorization server's.
	Routes map[string]http.Handler
	// AnyOrigin are paths among Routes that take requests from pages of
	// any origin (browser-based clients): endpoints that carry no cookie,
	// such as a token or registration endpoint. The metadata documents
	// always do.
	AnyOrigin []string
	// PublicURL is the origin clients reach the server at (a TLS proxy's,
	// say): the origin guard takes its host as Host and it as Origin,
	// which a consent page posted through that proxy carries.
	PublicURL string
}

// anyOrigin is the set of paths the origin guard lets any origin reach.
func (o *OAuth) anyOrigin() map[string]bool {
	u, _ := url.Parse(o.Resource)
	set := map[string]bool{metadataPath(u.Path): true, "/.well-known/oauth-protected-resource": true}
	for _, p := range o.AnyOrigin {
		set[p] = true
	}
	return set
}

// check refuses an OAuth that could not work, naming the field.
func (o *OAuth) check() error {
	u, err := url.Parse(o.Resource)
	switch {
	case o.Resource == "" || err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return fmt.Errorf("OAuth.Resource %q: want the absolute URL of /mcp, e.g. https://scratchrun.example.com/mcp", o.Resource)
	case u.Fragment != "" || u.RawQuery != "":
		return fmt.Errorf("OAuth.Resource %q: a resource has no query or fragment (RFC 8707)", o.Resource)
	case len(o.AuthorizationServers) == 0:
		return errors.New("OAuth.AuthorizationServers: name at least one issuer")
	case o.Verifier == nil:
		return errors.New("OAuth.Verifier is required")
	}
	return nil
}

// metadataURL is where the protected-resource metadata of Resource is
// served: the well-known path with the resource's path after it (RFC 9728
// §3.1), which clients try first.
func (o *OAuth) metadataURL() string {
	u, _ := url.Parse(o.Resource)
	return u.Scheme + "://" + u.Host + metadataPath(u.Path)
}

func metadataPath(resourcePath string) string {
	return "/.well-known/oauth-protected-resource" + strings.TrimSuffix(resourcePath, "/")
}

// mountOAuth adds the metadata documents and Routes to the server's routes.
func (s *Server) mountOAuth(t *routeTable) {
	o := s.cfg.OAuth
	u, _ := url.Parse(o.Resource)
	doc := auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               o.Resource,
		AuthorizationServers:   o.AuthorizationServers,
		ScopesSupported:        o.Scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "ScratchRun",
	})
	// The root document too: clients that find neither the header nor the
	// path-suffixed document look there last.
	paths := []string{metadataPath(u.Path), "/.well-known/oauth-protected-resource"}
	for _, p := range slices.Compact(paths) {
		t.handle("", p, oauthRoutes, s.m.instrument("/.well-known/oauth-protected-resource", doc))
	}
	for pattern, h := range o.Routes {
		method, path, ok := strings.Cut(pattern, " ")
		if !ok {
			method, path = "", pattern
		}
		t.handle(method, path, oauthRoutes, s.m.instrument("oauth", h))
	}
}

// tokenRefusal is why a request to /mcp was refused, as its challenge
// tells it (RFC 6750 §3): no token at all carries no error code.
type tokenRefusal struct {
	status      int
	code        string // "", invalid_request, invalid_token or insufficient_scope
	description string
}

// challenge writes the refusal's WWW-Authenticate: where the metadata is,
// and the scopes to ask for, so that a client can begin the flow.
func (o *OAuth) challenge(w http.ResponseWriter, t tokenRefusal) {
	parts := []string{}
	if t.code != "" {
		parts = append(parts, fmt.Sprintf("error=%q", t.code), fmt.Sprintf("error_description=%q", t.description))
	}
	parts = append(parts, fmt.Sprintf("resource_metadata=%q", o.metadataURL()))
	if len(o.Scopes) > 0 {
		parts = append(parts, fmt.Sprintf("scope=%q", strings.Join(o.Scopes, " ")))
	}
	w.Header().Set("WWW-Authenticate", "Bearer "+strings.Join(parts, ", "))
}

// grantContextKey carries a token's grant beside its key.
type grantContextKey struct{}

func grantFrom(ctx context.Context) *oauth.Grant {
	g, _ := ctx.Value(grantContextKey{}).(*oauth.Grant)
	return g
}

// verifyToken checks an OAuth access token and returns the key it acts as.
// A refusal is the client's (401/403 with a challenge); err is the
// server's (a key store or an authorization server that did not answer).
func (s *Server) verifyToken(ctx context.Context, token string) (*store.Key, *oauth.Grant, *tokenRefusal, error) {
	o := s.cfg.OAuth
	g, err := o.Verifier.Verify(ctx, token)
	if errors.Is(err, oauth.ErrInvalidToken) {
		return nil, nil, &tokenRefusal{http.StatusUnauthorized, "invalid_token", err.Error()}, nil
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("verify an OAuth token: %w", err)
	}
	k, err := s.auth.keys.KeyByID(ctx, g.KeyID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !k.Active()) {
		return nil, nil, &tokenRefusal{http.StatusUnauthorized, "invalid_token", "the key this token acts as is revoked"}, nil
	}
	if err != nil {
		return nil, nil, nil, err
	}
	for _, want := range o.Scopes {
		if !slices.Contains(g.Scopes, want) {
			return nil, nil, &tokenRefusal{http.StatusForbidden, "insufficient_scope", fmt.Sprintf("the token lacks the scope %q", want)}, nil
		}
	}
	return &k, &g, nil, nil
}

// looksLikeAPIKey tells an API key from an OAuth token by its prefix, so
// that a key is never sent to an authorization server to be checked.
func looksLikeAPIKey(token string) bool { return strings.HasPrefix(token, store.KeyPrefix) }
