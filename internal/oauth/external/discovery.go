package external

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// metadata is what the verifier reads of an authorization server's
// metadata (RFC 8414 §2; OpenID Connect Discovery 1.0 §3 has the same names).
type metadata struct {
	Issuer                string `json:"issuer"`
	JWKSURI               string `json:"jwks_uri"`
	IntrospectionEndpoint string `json:"introspection_endpoint"`
}

// maxDocument bounds a metadata, key set or introspection answer: an
// authorization server's documents are a few kilobytes.
const maxDocument = 1 << 20

// wellKnownURLs are where an issuer's metadata may be, in the order the
// MCP authorization specification tries them: RFC 8414 (the well-known
// path inserted before the issuer's path), then OpenID Connect discovery
// (inserted, then appended to the issuer, as OIDC defines it).
func wellKnownURLs(issuer string) ([]string, error) {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("issuer %q is not an http(s) URL", issuer)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("issuer %q has a query or fragment (RFC 8414 §2 forbids them)", issuer)
	}
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	at := func(p string) string { return (&url.URL{Scheme: u.Scheme, Host: u.Host}).String() + p }
	urls := []string{at("/.well-known/oauth-authorization-server" + path)}
	if path == "" {
		return append(urls, at("/.well-known/openid-configuration")), nil
	}
	return append(urls, at("/.well-known/openid-configuration"+path), at(path+"/.well-known/openid-configuration")), nil
}

// discover fetches the issuer's metadata from the first well-known URL
// that has it. The metadata must name exactly this issuer (RFC 8414 §3.3),
// or a server could pass off another's keys.
func discover(ctx context.Context, c *http.Client, issuer string) (metadata, error) {
	urls, err := wellKnownURLs(issuer)
	if err != nil {
		return metadata{}, err
	}
	var tried []string
	for _, u := range urls {
		var md metadata
		status, err := getJSON(ctx, c, u, &md)
		if status == http.StatusNotFound || status == http.StatusMethodNotAllowed || status == http.StatusGone {
			tried = append(tried, fmt.Sprintf("%s: %d", u, status))
			continue
		}
		if err != nil {
			return metadata{}, fmt.Errorf("metadata %s: %w", u, err)
		}
		if md.Issuer != issuer {
			return metadata{}, fmt.Errorf("metadata %s names issuer %q, not %q (the issuer must be exactly the one the metadata gives)", u, md.Issuer, issuer)
		}
		return md, nil
	}
	return metadata{}, fmt.Errorf("no metadata for issuer %q (tried %s)", issuer, strings.Join(tried, ", "))
}

// getJSON GETs u and decodes its JSON answer into v; status is the
// answer's status code (0 when there was none).
func getJSON(ctx context.Context, c *http.Client, u string, v any) (status int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	return doJSON(c, req, v)
}

// doJSON sends req and decodes its 200 JSON answer, bounded, into v.
func doJSON(c *http.Client, req *http.Request, v any) (status int, err error) {
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	if err != nil {
		return resp.StatusCode, err
	}
	if len(body) > maxDocument {
		return resp.StatusCode, fmt.Errorf("answer larger than %d bytes", maxDocument)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("status %d", resp.StatusCode)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return resp.StatusCode, errors.New("answer is not the JSON object expected: " + err.Error())
	}
	return resp.StatusCode, nil
}
