package oauthclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// Handler is the auth.OAuthHandler of the Streamable HTTP transport to one
// server. It owns the token source (the SDK's handler only signs in), so
// that a grant loaded from the store is used without a browser, refreshed
// tokens are saved, and a refused access token is refreshed once before a
// new sign-in.
type Handler struct {
	cfg Config

	// signIn serializes Authorize: concurrent 401s lead to one sign-in,
	// and the requests that waited for it retry with its token.
	signIn sync.Mutex

	mu      sync.RWMutex
	current *savingSource
}

var _ auth.OAuthHandler = (*Handler)(nil)

// New makes a Handler and, when the store has a grant for the endpoint at
// the issuer the server names today, starts from it. Finding the issuer
// needs the server's metadata: when the server cannot be asked, the
// handler starts with nothing and signs in at the first 401.
func New(ctx context.Context, cfg Config) (*Handler, error) {
	if cfg.Endpoint == "" {
		return nil, errors.New("oauthclient: no endpoint")
	}
	h := &Handler{cfg: cfg.withDefaults()}
	issuer, err := discoverIssuer(ctx, h.cfg.HTTPClient, h.cfg.Endpoint, "")
	if err != nil {
		return h, nil
	}
	g, err := h.cfg.Store.Load(issuer, h.cfg.Endpoint)
	switch {
	case err == nil:
		h.current = h.newSource(*g, nil)
	case !errors.Is(err, ErrNoGrant):
		// A grant the store refuses (a file others may read) is not
		// used; signing in again replaces it with a private one.
		fmt.Fprintf(h.cfg.Stderr, "scratchrun mcp: not using the stored sign-in: %v\n", err)
	}
	return h, nil
}

// TokenSource implements auth.OAuthHandler: nil until there is a grant.
func (h *Handler) TokenSource(context.Context) (oauth2.TokenSource, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.current == nil {
		return nil, nil // a typed nil would look like a source to the transport
	}
	return h.current, nil
}

func (h *Handler) source() *savingSource {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.current
}

// drop forgets s's grant, in memory and in the store, if it is still the
// current one.
func (h *Handler) drop(s *savingSource) {
	h.mu.Lock()
	if h.current == s {
		h.current = nil
	}
	h.mu.Unlock()
	if err := h.cfg.Store.Forget(h.cfg.Endpoint); err != nil {
		fmt.Fprintf(h.cfg.Stderr, "scratchrun mcp: forgetting the stored sign-in: %v\n", err)
	}
}

// save keeps g; a store that fails costs the next run a sign-in, not this
// one its token.
func (h *Handler) save(g *Grant) {
	if err := h.cfg.Store.Save(g); err != nil {
		fmt.Fprintf(h.cfg.Stderr, "scratchrun mcp: the sign-in could not be saved (the next start signs in again): %v\n", err)
	}
}

// Authorize implements auth.OAuthHandler: the transport's request got a
// 401 or 403.
func (h *Handler) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	h.signIn.Lock()
	defer h.signIn.Unlock()
	sent := bearer(req)
	if cur := h.source(); cur != nil {
		if t, err := cur.Token(); err == nil && t.AccessToken != sent {
			// Another request signed in or refreshed while this one
			// waited: retry with that token.
			discard(resp)
			return nil
		}
		if resp.StatusCode == http.StatusUnauthorized && cur.refresh(sent) {
			discard(resp)
			return nil
		}
	}
	return h.authorize(ctx, req, resp)
}

// authorize runs a full sign-in through the SDK's handler, with a loopback
// listener that lives as long as the sign-in.
func (h *Handler) authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	issuer, err := discoverIssuer(ctx, h.cfg.HTTPClient, h.cfg.Endpoint, challengeMetadataURL(resp))
	if err != nil {
		discard(resp)
		return err
	}
	ln, redirect, err := listenCallback(h.cfg.CallbackPort)
	if err != nil {
		discard(resp)
		return err
	}
	defer ln.Close()
	var cimd *auth.ClientIDMetadataDocumentConfig
	if h.cfg.ClientMetadataURL != "" {
		cimd = &auth.ClientIDMetadataDocumentConfig{URL: h.cfg.ClientMetadataURL}
	}
	inner, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		ClientIDMetadataDocumentConfig: cimd,
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName:              h.cfg.ClientName,
			SoftwareID:              "scratchrun",
			SoftwareVersion:         h.cfg.ClientVersion,
			RedirectURIs:            []string{redirect},
			GrantTypes:              []string{"authorization_code", "refresh_token"},
			ResponseTypes:           []string{"code"},
			TokenEndpointAuthMethod: "none",
			ApplicationType:         "native",
		}},
		RedirectURL:              redirect,
		AuthorizationCodeFetcher: h.fetcher(ln, issuer),
		RequestRefreshToken:      true,
		Client:                   h.cfg.HTTPClient,
		NewTokenSource: func(_ context.Context, c *oauth2.Config, t *oauth2.Token) (oauth2.TokenSource, error) {
			return h.adopt(issuer, c, t), nil
		},
	})
	if err != nil {
		discard(resp)
		return fmt.Errorf("oauthclient: %w", err)
	}
	// A 403 that asks for no scope returns nil without a sign-in: the
	// transport retries as it is and reports the 403.
	if err := inner.Authorize(ctx, req, resp); err != nil {
		return fmt.Errorf("signing in to %s: %w", h.cfg.Endpoint, err)
	}
	return nil
}

// adopt makes the token of a finished sign-in the current one, and keeps
// its grant when the server gave a refresh token.
func (h *Handler) adopt(issuer string, c *oauth2.Config, t *oauth2.Token) *savingSource {
	g := Grant{
		Issuer: issuer, Resource: h.cfg.Endpoint,
		ClientID: c.ClientID, ClientSecret: c.ClientSecret,
		TokenURL: c.Endpoint.TokenURL, AuthStyle: c.Endpoint.AuthStyle,
		RefreshToken: t.RefreshToken, Scopes: c.Scopes,
	}
	s := h.newSource(g, t)
	h.mu.Lock()
	h.current = s
	h.mu.Unlock()
	if g.RefreshToken != "" {
		h.save(&g)
	} else if err := h.cfg.Store.Forget(h.cfg.Endpoint); err != nil {
		// Without a refresh token this sign-in lasts as long as its
		// access token; an older stored grant is stale either way.
		fmt.Fprintf(h.cfg.Stderr, "scratchrun mcp: forgetting the stored sign-in: %v\n", err)
	}
	return s
}

// bearer is the access token req carried, or "".
func bearer(req *http.Request) string {
	scheme, token, ok := strings.Cut(req.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// discard closes a response Authorize does not hand to the SDK (which
// closes the ones it gets).
func discard(resp *http.Response) {
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}
