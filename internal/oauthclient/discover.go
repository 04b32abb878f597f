package oauthclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// discoverIssuer finds the issuer of the authorization server that guards
// resource, the way the SDK's handler does before it signs in (RFC 9728
// metadata from the challenge's resource_metadata, then at the endpoint's
// path, then at the root; the first authorization server it names, or the
// resource's origin for a 2025-03-26 server with no metadata; that
// server's RFC 8414 issuer). The handler needs the issuer the SDK keeps to
// itself: it is the key a grant is stored under.
func discoverIssuer(ctx context.Context, c *http.Client, resource, metadataURL string) (string, error) {
	as := ""
	for _, try := range metadataURLs(metadataURL, resource) {
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, try.url, try.resource, c)
		if err != nil || prm == nil {
			continue
		}
		if len(prm.AuthorizationServers) == 0 {
			return "", fmt.Errorf("oauthclient: %s names no authorization server", try.url)
		}
		as = prm.AuthorizationServers[0]
		break
	}
	if as == "" {
		u, err := url.Parse(resource)
		if err != nil {
			return "", fmt.Errorf("oauthclient: %w", err)
		}
		u.Path, u.RawQuery, u.Fragment = "", "", ""
		as = u.String()
	}
	asm, err := auth.GetAuthServerMetadata(ctx, as, c)
	if err != nil {
		return "", fmt.Errorf("oauthclient: the authorization server's metadata: %w", err)
	}
	if asm == nil {
		return as, nil
	}
	return asm.Issuer, nil
}

type metadataURL struct{ url, resource string }

// metadataURLs are where RFC 9728 metadata may be, in the order the MCP
// specification tries them, each with the resource it must name.
func metadataURLs(fromChallenge, resource string) []metadataURL {
	var out []metadataURL
	if fromChallenge != "" {
		out = append(out, metadataURL{fromChallenge, resource})
	}
	u, err := url.Parse(resource)
	if err != nil {
		return out
	}
	m := *u
	m.Path = "/.well-known/oauth-protected-resource/" + strings.TrimLeft(u.Path, "/")
	out = append(out, metadataURL{m.String(), resource})
	m.Path = "/.well-known/oauth-protected-resource"
	root := *u
	root.Path = ""
	return append(out, metadataURL{m.String(), root.String()})
}

// challengeMetadataURL is the resource_metadata of a 401's or 403's
// WWW-Authenticate, or "".
func challengeMetadataURL(resp *http.Response) string {
	cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		return ""
	}
	for _, c := range cs {
		if u := c.Params["resource_metadata"]; u != "" {
			return u
		}
	}
	return ""
}
