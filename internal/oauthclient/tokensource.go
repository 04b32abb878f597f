package oauthclient

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"golang.org/x/oauth2"
)

// savingSource is the token source of one grant: it refreshes at the
// grant's token endpoint, saves every rotated refresh token as it arrives
// (OAuth 2.1 §4.3.1 rotates them for public clients, so the old one is
// dead once the new one is issued), and gives the grant up when the token
// endpoint refuses it.
type savingSource struct {
	h   *Handler
	ctx context.Context // carries the OAuth HTTP client for refreshes

	mu    sync.Mutex
	grant Grant
	base  oauth2.TokenSource
	// forced is the access token the last forced refresh gave: when the
	// server refuses that one too, refreshing again would only loop.
	forced string
}

func (h *Handler) newSource(g Grant, tok *oauth2.Token) *savingSource {
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, h.cfg.HTTPClient)
	if tok == nil {
		// A stored grant has no access token: the first Token refreshes.
		tok = &oauth2.Token{RefreshToken: g.RefreshToken}
	}
	return &savingSource{h: h, ctx: ctx, grant: g, base: g.config().TokenSource(ctx, tok)}
}

// Token implements oauth2.TokenSource.
func (s *savingSource) Token() (*oauth2.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokenLocked()
}

func (s *savingSource) tokenLocked() (*oauth2.Token, error) {
	t, err := s.base.Token()
	if err != nil {
		var re *oauth2.RetrieveError
		if !errors.As(err, &re) || (re.Response != nil && re.Response.StatusCode >= http.StatusInternalServerError) {
			return nil, err // the network or the server: the grant may still be good
		}
		// The token endpoint refused the grant (expired, revoked, a
		// client it no longer knows). Forget it, and answer as the
		// transport expects of a dead grant: invalid_grant makes it send
		// the request without a token, so that the 401 starts a sign-in.
		s.h.drop(s)
		return nil, &oauth2.RetrieveError{Response: re.Response, Body: re.Body, ErrorCode: "invalid_grant", ErrorDescription: re.Error()}
	}
	if t.RefreshToken != "" && t.RefreshToken != s.grant.RefreshToken {
		s.grant.RefreshToken = t.RefreshToken
		s.h.save(&s.grant)
	}
	return t, nil
}

// refresh gets a new access token now, whatever the old one's expiry
// said: the server refused it (revoked, or its clock disagrees). It
// reports false when that refresh was tried before for the token the
// server refused, or failed.
func (s *savingSource) refresh(refused string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if refused == "" || refused == s.forced {
		return false
	}
	s.base = s.grant.config().TokenSource(s.ctx, &oauth2.Token{RefreshToken: s.grant.RefreshToken})
	t, err := s.tokenLocked()
	if err != nil {
		return false
	}
	s.forced = t.AccessToken
	return true
}
