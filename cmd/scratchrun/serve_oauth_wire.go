//go:build linux

package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/scratchrun/scratchrun/internal/httpapi"
	"github.com/scratchrun/scratchrun/internal/oauth/authserver"
	"github.com/scratchrun/scratchrun/internal/oauth/external"
	"github.com/scratchrun/scratchrun/internal/store"
)

// build turns the setup into the server's OAuth, nil when it is off. The
// public URL falls back to the bound listener's (loopback only); an
// external authorization server is asked for its metadata and keys now,
// so that a wrong issuer fails the start rather than every request.
func (o oauthSetup) build(ctx context.Context, ln net.Listener, keys *store.Store, log *slog.Logger) (*httpapi.OAuth, error) {
	if !o.on() {
		return nil, nil
	}
	if err := o.resolvePublicURL(ln); err != nil {
		return nil, err
	}
	resource := o.publicURL + "/mcp"
	switch o.mode {
	case "external":
		rules, err := external.ParseRules(o.rules)
		if err != nil {
			return nil, fmt.Errorf("--oauth-keys (SCRATCHRUN_OAUTH_KEYS): %w", err)
		}
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		// The scope is httpapi's to check: a token without it gets 403
		// insufficient_scope, not 401.
		v, err := external.New(ctx, external.Config{Issuer: o.issuer, Resource: resource, ClientID: o.clientID, ClientSecret: o.clientSecret,
			Rules: rules, Keys: keys})
		if err != nil {
			return nil, fmt.Errorf("--oauth external: %w", err)
		}
		return &httpapi.OAuth{Resource: resource, AuthorizationServers: []string{o.issuer}, Scopes: o.scopes(), Verifier: v, PublicURL: o.publicURL}, nil
	}
	as, err := authserver.New(authserver.Config{Issuer: o.publicURL, Resource: resource, Scope: o.scope,
		AccessTokenTTL: o.accessTTL, RefreshTokenTTL: o.refreshTTL, Keys: keys, State: keys, Registration: o.registration, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("--oauth builtin: %w", err)
	}
	return &httpapi.OAuth{Resource: resource, AuthorizationServers: []string{o.publicURL}, Scopes: o.scopes(), Verifier: as.Verifier(),
		Routes: as.Routes(), AnyOrigin: as.AnyOriginPaths(), PublicURL: o.publicURL}, nil
}

func (o oauthSetup) scopes() []string {
	if o.scope == "" {
		return nil
	}
	return []string{o.scope}
}
