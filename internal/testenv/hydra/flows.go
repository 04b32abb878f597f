package hydra

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Client is an OAuth client registered at Hydra.
type Client struct {
	// ID is the client_id Hydra assigned; Secret its secret ("" for a
	// public client).
	ID, Secret string
	// RedirectURIs are matched exactly at the authorization endpoint.
	RedirectURIs []string
	// GrantTypes default to authorization_code and refresh_token.
	GrantTypes []string
	// Scope is the space-separated scopes the client may ask for
	// (default "openid offline_access scratchrun").
	Scope string
	// Audience is what the client may ask for with Hydra's audience
	// parameter (client credentials); the consent app grants the RFC 8707
	// resource whatever it is.
	Audience []string
	// Public makes a client with no secret (token_endpoint_auth_method
	// none), as an MCP desktop client is.
	Public bool
}

// CreateClient registers c over the admin API and returns it with the
// ID (and Secret) Hydra gave it.
func (h *Instance) CreateClient(t testing.TB, c Client) Client {
	t.Helper()
	if len(c.GrantTypes) == 0 {
		c.GrantTypes = []string{"authorization_code", "refresh_token"}
	}
	if c.Scope == "" {
		c.Scope = "openid offline_access scratchrun"
	}
	body := map[string]any{
		"client_name": "scratchrun-test", "grant_types": c.GrantTypes, "response_types": []string{"code"},
		"redirect_uris": c.RedirectURIs, "scope": c.Scope, "audience": c.Audience,
		"token_endpoint_auth_method": "client_secret_basic",
	}
	if c.Public {
		body["token_endpoint_auth_method"] = "none"
	}
	var out struct {
		ID     string `json:"client_id"`
		Secret string `json:"client_secret"`
	}
	if err := h.adminDo(context.Background(), http.MethodPost, "/admin/clients", body, &out); err != nil {
		t.Fatalf("hydra: create client: %v", err)
	}
	c.ID, c.Secret = out.ID, out.Secret
	return c
}

// Tokens are a token endpoint's answer.
type Tokens struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	IDToken      string `json:"id_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int    `json:"expires_in"`
	Scope        string `json:"scope"`
}

// AuthCodeRequest is one authorization-code flow.
type AuthCodeRequest struct {
	// Client must have RedirectURIs; the first is used.
	Client Client
	// Scope asked for (default "openid offline_access scratchrun").
	Scope string
	// Resource is the RFC 8707 resource (the MCP server's URL), sent in
	// the authorization and the token request as MCP clients send it; the
	// consent app grants it as the audience.
	Resource string
	// Subject is whom to sign in (login_hint); default the instance's.
	Subject string
}

// AuthCode runs the authorization-code flow with PKCE (S256) as a browser
// would, with a cookie jar and following Hydra's redirects through the
// login and consent app until the one to the client's redirect URI, then
// exchanges the code.
func (h *Instance) AuthCode(t testing.TB, r AuthCodeRequest) Tokens {
	t.Helper()
	if r.Scope == "" {
		r.Scope = "openid offline_access scratchrun"
	}
	if len(r.Client.RedirectURIs) == 0 {
		t.Fatal("hydra: AuthCode: the client has no redirect URI")
	}
	redirectURI := r.Client.RedirectURIs[0]
	verifier, state := random(32), random(16)
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{
		"response_type": {"code"}, "client_id": {r.Client.ID}, "redirect_uri": {redirectURI}, "scope": {r.Scope},
		"state": {state}, "code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
	}
	if r.Resource != "" {
		q.Set("resource", r.Resource)
	}
	if r.Subject != "" {
		q.Set("login_hint", r.Subject)
	}
	got := h.FollowAuthorization(t, h.PublicURL+"/oauth2/auth?"+q.Encode(), redirectURI)
	if got.Get("state") != state {
		t.Fatal("hydra: the redirect's state is not the request's")
	}
	code := got.Get("code")
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"redirect_uri": {redirectURI}, "code_verifier": {verifier}}
	if r.Resource != "" {
		form.Set("resource", r.Resource)
	}
	return h.token(t, r.Client, form)
}

// FollowAuthorization is the browser of an authorization request that
// some client built (the MCP SDK's, say): it GETs authURL with a cookie
// jar and follows Hydra's redirects through the login and consent app
// until the one to redirectURI, whose query (code and state) it returns.
// An error in that redirect fails t.
func (h *Instance) FollowAuthorization(t testing.TB, authURL, redirectURI string) url.Values {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	var final *url.URL
	browser := &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), redirectURI) {
			final = req.URL
			return http.ErrUseLastResponse
		}
		if len(via) > 20 {
			return errors.New("more than 20 redirects")
		}
		return nil
	}}
	resp, err := browser.Get(authURL)
	if err != nil {
		t.Fatalf("hydra: authorization request: %v", err)
	}
	page, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if final == nil {
		t.Fatalf("hydra: the authorization flow ended at %s (%d) without reaching %s: %s\n%s", resp.Request.URL, resp.StatusCode, redirectURI, page, h.LogTail())
	}
	if e := final.Query().Get("error"); e != "" {
		t.Fatalf("hydra: authorization refused: %s: %s", e, final.Query().Get("error_description"))
	}
	return final.Query()
}

// ClientCredentials gets a token for the client itself (its subject is
// its ID), for audience (which must be in the client's Audience).
func (h *Instance) ClientCredentials(t testing.TB, c Client, scope, audience string) Tokens {
	t.Helper()
	return h.token(t, c, url.Values{"grant_type": {"client_credentials"}, "scope": {scope}, "audience": {audience}})
}

// token posts form to the token endpoint as c.
func (h *Instance) token(t testing.TB, c Client, form url.Values) Tokens {
	t.Helper()
	if c.Secret == "" {
		form.Set("client_id", c.ID)
	}
	req, err := http.NewRequest(http.MethodPost, h.PublicURL+"/oauth2/token", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if c.Secret != "" {
		req.SetBasicAuth(url.QueryEscape(c.ID), url.QueryEscape(c.Secret))
	}
	var tok Tokens
	if err := do(req, &tok); err != nil {
		t.Fatalf("hydra: token request (%s): %v", form.Get("grant_type"), err)
	}
	return tok
}

func random(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// doJSON sends body (when not nil) as JSON and decodes a 2xx answer into out.
func doJSON(ctx context.Context, method, u string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return do(req, out)
}

func do(req *http.Request, out any) error {
	req.Header.Set("Accept", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d: %s", req.Method, req.URL.Path, resp.StatusCode, b)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}
