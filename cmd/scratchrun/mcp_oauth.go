package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/buildinfo"
	"github.com/scratchrun/scratchrun/internal/mcpproxy"
	"github.com/scratchrun/scratchrun/internal/oauthclient"
	"github.com/scratchrun/scratchrun/internal/settings"
)

// mcpSignInHelp is the sign-in's part of mcp's help: what a person or a
// test without a browser needs.
const mcpSignInHelp = `the URL is also printed on stderr as
"scratchrun mcp: sign in at URL"; the sign-in is kept in the OS keychain or a
file only you can read, and scratchrun logout forgets it`

// mcpOAuth is `scratchrun mcp` as a proxy to a server's /mcp that signs in
// with OAuth: SCRATCHRUN_API_URL set and no SCRATCHRUN_API_KEY.
type mcpOAuth struct {
	endpoint, clientMetadataURL string
	callbackPort                int
	store, dir                  string
}

// parseMCPOAuth reads the sign-in's settings; endpoint is the server's
// MCP URL (SCRATCHRUN_API_URL with /mcp added, unless it ends in /mcp).
func parseMCPOAuth(v *settings.Values) (mcpOAuth, error) {
	o := mcpOAuth{
		clientMetadataURL: v.String(settings.OAuthClientMetadataURL),
		callbackPort:      v.Int(settings.OAuthCallbackPort),
		store:             v.String(settings.OAuthStore),
		dir:               v.String(settings.OAuthDir),
	}
	var err error
	if o.endpoint, err = mcpEndpoint(v.String(settings.APIURL)); err != nil {
		return o, err
	}
	if o.clientMetadataURL != "" {
		u, err := url.Parse(o.clientMetadataURL)
		if err != nil || u.Scheme != "https" || strings.Trim(u.Path, "/") == "" {
			return o, fmt.Errorf("%s %q: a client ID metadata document's URL is https with a path", settings.OAuthClientMetadataURL.Env, o.clientMetadataURL)
		}
		if o.callbackPort == 0 {
			return o, fmt.Errorf("%s needs %s: the document lists the redirect URI, port and all", settings.OAuthClientMetadataURL.Env, settings.OAuthCallbackPort.Env)
		}
	}
	return o, nil
}

// mcpEndpoint is the MCP endpoint of the server at base: base's /mcp, or
// base itself when it names /mcp already.
func mcpEndpoint(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q is not an http(s) URL of a ScratchRun server", base)
	}
	u.RawQuery, u.Fragment = "", ""
	if !strings.HasSuffix(u.Path, "/mcp") {
		u.Path = strings.TrimRight(u.Path, "/") + "/mcp"
	}
	return u.String(), nil
}

// runMCPOAuth forwards stdio to the server's /mcp message by message (the
// client sees the server's tools as they are), signing in when the server
// asks for a token.
func runMCPOAuth(ctx context.Context, o mcpOAuth, log *slog.Logger) int {
	store, err := oauthclient.NewStore(o.store, o.dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun mcp: %v\n", err)
		return exitUsage
	}
	h, err := oauthclient.New(ctx, oauthclient.Config{
		Endpoint:          o.endpoint,
		ClientMetadataURL: o.clientMetadataURL,
		CallbackPort:      o.callbackPort,
		Store:             store,
		ClientVersion:     buildinfo.Get().Version,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun mcp: %v\n", err)
		return exitInternal
	}
	log.Debug("mcp: forwarding to a server's /mcp, signing in with OAuth", "url", o.endpoint)
	p := &mcpproxy.Proxy{Log: log}
	remote := &mcp.StreamableClientTransport{Endpoint: o.endpoint, HTTPClient: p.HTTPClient(nil), OAuthHandler: h}
	if err := p.Run(ctx, &mcp.StdioTransport{}, remote); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "scratchrun mcp: %v\n", err)
		return exitInternal
	}
	return 0
}
