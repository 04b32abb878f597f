package authserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/oauth"
)

const loopbackRedirect = "http://127.0.0.1:5173/callback"

// Both metadata paths serve one RFC 8414 document with what MCP clients
// look for; without registration there is neither its endpoint nor its
// route.
func TestMetadata(t *testing.T) {
	e := newEnv(t, "", nil)
	var docs []map[string]any
	for _, p := range []string{pathASMetadata, pathOIDCMetadata} {
		resp, body := e.get(e.issuer + p)
		var m map[string]any
		if err := json.Unmarshal([]byte(body), &m); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %v", p, resp.StatusCode, err)
		}
		docs = append(docs, m)
	}
	m := docs[0]
	want := map[string]any{
		"issuer": e.issuer, "authorization_endpoint": e.issuer + pathAuthorize, "token_endpoint": e.issuer + pathToken,
		"registration_endpoint": e.issuer + pathRegister, "jwks_uri": e.issuer + pathKeys,
		"client_id_metadata_document_supported": true, "authorization_response_iss_parameter_supported": true,
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	if got, _ := json.Marshal(m["code_challenge_methods_supported"]); string(got) != `["S256"]` {
		t.Errorf("code_challenge_methods_supported = %s", got)
	}
	a, _ := json.Marshal(docs[0])
	b, _ := json.Marshal(docs[1])
	if !bytes.Equal(a, b) {
		t.Errorf("the two documents differ:\n%s\n%s", a, b)
	}
	// The keys the tokens are signed with.
	if resp, body := e.get(e.issuer + pathKeys); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"ES256"`) {
		t.Errorf("keys: %d %s", resp.StatusCode, body)
	}
	// op's endpoints this server does not offer are not mounted.
	if resp, _ := e.get(e.issuer + "/userinfo"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("userinfo: %d", resp.StatusCode)
	}

	off := newEnv(t, "", func(c *Config) { c.Registration = false })
	if _, ok := off.srv.Routes()[pathRegister]; ok {
		t.Error("registration off, but its route is there")
	}
	if off.srv.metadataDocument().RegistrationEndpoint != "" {
		t.Error("registration off, but the metadata names its endpoint")
	}
}

// RFC 7591 registration: a public client with valid redirect URIs is
// registered; anything else is refused with the RFC's error codes.
func TestRegister(t *testing.T) {
	e := newEnv(t, "", nil)
	id := e.register(loopbackRedirect, "authorization_code", "refresh_token")
	if !strings.HasPrefix(id, "src_") {
		t.Errorf("client id %q", id)
	}
	for _, c := range []struct{ name, body, code string }{
		{"no redirect", `{"client_name":"x"}`, "invalid_redirect_uri"},
		{"http elsewhere", `{"redirect_uris":["http://example.com/cb"]}`, "invalid_redirect_uri"},
		{"fragment", `{"redirect_uris":["https://example.com/cb#x"]}`, "invalid_redirect_uri"},
		{"custom scheme", `{"redirect_uris":["myapp:/cb"]}`, "invalid_redirect_uri"},
		{"secret", `{"redirect_uris":["https://example.com/cb"],"token_endpoint_auth_method":"client_secret_basic"}`, "invalid_client_metadata"},
		{"implicit", `{"redirect_uris":["https://example.com/cb"],"grant_types":["implicit"]}`, "invalid_client_metadata"},
		{"not JSON", `redirect_uris=x`, "invalid_client_metadata"},
	} {
		resp, err := http.Post(e.issuer+pathRegister, "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		wantOAuthError(t, c.name, resp.StatusCode, out, http.StatusBadRequest, c.code)
	}
	big := `{"client_name":"` + strings.Repeat("x", maxBody) + `","redirect_uris":["https://example.com/cb"]}`
	resp, err := http.Post(e.issuer+pathRegister, "application/json", strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a registration over 64 KiB: %d", resp.StatusCode)
	}
}

// The whole flow with a registered client: consent with the key, the code
// for tokens with the verifier, the token accepted as the key, refresh
// rotating, the old refresh token refused (and its reuse ending the
// grant), and nothing secret in any log line.
func TestFlow(t *testing.T) {
	e := newEnv(t, "", nil)
	clientID := e.register(loopbackRedirect, "authorization_code", "refresh_token")
	verifier, challenge := pkce()

	id := e.authorize(e.authQuery(clientID, loopbackRedirect, challenge))
	_, page := e.consentPage(id)
	for _, want := range []string{"Test client", "127.0.0.1:5173", `id="localhost_warning"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the consent page does not show %q", want)
		}
	}
	code := e.code(clientID, loopbackRedirect, challenge)
	status, tok := e.exchange(clientID, loopbackRedirect, code, verifier)
	at, rt := str(tok["access_token"]), str(tok["refresh_token"])
	if status != http.StatusOK || at == "" || !strings.HasPrefix(rt, refreshTokenPrefix) {
		t.Fatalf("token: %d %v", status, tok)
	}
	g, err := e.srv.Verifier().Verify(context.Background(), at)
	if err != nil || g.KeyID != e.key.ID || g.ClientID != clientID || !slices.Contains(g.Scopes, "scratchrun") || g.Expiry.IsZero() {
		t.Fatalf("verify: %+v, %v", g, err)
	}

	status, tok2 := e.refresh(clientID, rt)
	at2, rt2 := str(tok2["access_token"]), str(tok2["refresh_token"])
	if status != http.StatusOK || at2 == "" || rt2 == "" || rt2 == rt {
		t.Fatalf("refresh: %d %v", status, tok2)
	}
	if g, err := e.srv.Verifier().Verify(context.Background(), at2); err != nil || g.KeyID != e.key.ID {
		t.Errorf("verify the refreshed token: %+v, %v", g, err)
	}
	status, out := e.refresh(clientID, rt)
	wantOAuthError(t, "the rotated-out refresh token", status, out, http.StatusBadRequest, "invalid_grant")
	status, out = e.refresh(clientID, rt2)
	wantOAuthError(t, "the live refresh token after a reuse", status, out, http.StatusBadRequest, "invalid_grant")

	logs := e.logs.String()
	for what, secret := range map[string]string{"API key": e.secret, "code": code, "access token": at, "refresh token": rt, "second refresh token": rt2, "verifier": verifier} {
		if strings.Contains(logs, secret) {
			t.Errorf("the %s is in the log:\n%s", what, logs)
		}
	}
	if !strings.Contains(logs, "consent given") {
		t.Errorf("the log has no consent line:\n%s", logs)
	}
}

// Each refused step says why, in OAuth's terms; the ones where the client
// or its redirect is not trusted are a page, never a redirect.
func TestRefusals(t *testing.T) {
	e := newEnv(t, "", nil)
	clientID := e.register(loopbackRedirect, "authorization_code", "refresh_token")
	verifier, challenge := pkce()

	// Errors shown as a page, with no redirect.
	page := func(what string, q url.Values, code string) {
		t.Helper()
		resp, body := e.get(e.issuer + pathAuthorize + "?" + q.Encode())
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" || !strings.Contains(body, `<code id="error">`+code+`</code>`) {
			t.Errorf("%s: %d to %q: %s", what, resp.StatusCode, resp.Header.Get("Location"), body)
		}
	}
	q := e.authQuery(clientID, "http://127.0.0.1:5174/callback", challenge)
	page("another port", q, "invalid_request")
	q = e.authQuery(clientID, loopbackRedirect+"/more", challenge)
	page("a longer path", q, "invalid_request")
	q = e.authQuery("src_nosuch", loopbackRedirect, challenge)
	page("unknown client", q, "invalid_client")

	// Errors redirected to the (trusted) redirect URI.
	redirected := func(what string, q url.Values, code string) {
		t.Helper()
		resp, body := e.get(e.issuer + pathAuthorize + "?" + q.Encode())
		u, _ := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusFound || u == nil || !strings.HasPrefix(u.String(), loopbackRedirect+"?") ||
			u.Query().Get("error") != code || u.Query().Get("error_description") == "" || u.Query().Get("iss") != e.issuer || u.Query().Get("state") != "st-1" {
			t.Errorf("%s: %d to %v: %s", what, resp.StatusCode, u, body)
		}
	}
	q = e.authQuery(clientID, loopbackRedirect, challenge)
	q.Set("code_challenge_method", "plain")
	redirected("plain PKCE", q, "invalid_request")
	q = e.authQuery(clientID, loopbackRedirect, "")
	q.Del("code_challenge")
	q.Del("code_challenge_method")
	redirected("no PKCE", q, "invalid_request")
	q = e.authQuery(clientID, loopbackRedirect, challenge)
	q.Set("resource", "https://elsewhere.example/mcp")
	redirected("another resource", q, "invalid_target")

	// The consent form.
	id := e.authorize(e.authQuery(clientID, loopbackRedirect, challenge))
	csrf, _ := e.consentPage(id)
	resp, body := e.postConsent(id, csrf, e.secret, "allow", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"})
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Location") != "" {
		t.Errorf("cross-site consent: %d %s", resp.StatusCode, body)
	}
	resp, body = e.postConsent(id, csrf, e.secret, "allow", map[string]string{"Sec-Fetch-Site": "same-site"})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("same-site (another subdomain) consent: %d %s", resp.StatusCode, body)
	}
	resp, body = e.postConsent(id, "wrong"+csrf, e.secret, "allow", e.sameOrigin())
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "access_denied") {
		t.Errorf("wrong CSRF token: %d %s", resp.StatusCode, body)
	}
	resp, body = e.postConsent(id, csrf, "sr_live_"+strings.Repeat("x", 43), "allow", e.sameOrigin())
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "not an active API key") || !strings.Contains(body, `name="csrf"`) {
		t.Errorf("wrong key: %d %s", resp.StatusCode, body)
	}
	resp, body = e.postConsent(id, csrf, "", "deny", e.sameOrigin())
	u, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || u == nil || u.Query().Get("error") != "access_denied" || u.Query().Get("iss") != e.issuer || u.Query().Get("state") != "st-1" {
		t.Errorf("deny: %d to %v: %s", resp.StatusCode, u, body)
	}
	if resp, _ := e.get(e.issuer + pathConsent + "?id=" + id); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("the denied request's page: %d", resp.StatusCode)
	}

	// The token endpoint.
	code := e.code(clientID, loopbackRedirect, challenge)
	other, _ := pkce()
	status, out := e.exchange(clientID, loopbackRedirect, code, other)
	wantOAuthError(t, "wrong verifier", status, out, http.StatusBadRequest, "invalid_grant")

	code = e.code(clientID, loopbackRedirect, challenge)
	status, out = e.token(url.Values{"grant_type": {"authorization_code"}, "client_id": {clientID}, "redirect_uri": {loopbackRedirect},
		"code": {code}, "code_verifier": {verifier}, "resource": {"https://elsewhere.example/mcp"}})
	wantOAuthError(t, "another resource at the token endpoint", status, out, http.StatusBadRequest, "invalid_target")
	status, tok := e.exchange(clientID, loopbackRedirect, code, verifier)
	if status != http.StatusOK {
		t.Fatalf("exchange: %d %v", status, tok)
	}
	status, out = e.exchange(clientID, loopbackRedirect, code, verifier)
	wantOAuthError(t, "replayed code", status, out, http.StatusBadRequest, "invalid_grant")
	status, out = e.refresh(clientID, str(tok["refresh_token"]))
	wantOAuthError(t, "the refresh token of a replayed code's grant", status, out, http.StatusBadRequest, "invalid_grant")

	logs := e.logs.String()
	for what, secret := range map[string]string{"API key": e.secret, "code": code, "refresh token": str(tok["refresh_token"]), "access token": str(tok["access_token"])} {
		if strings.Contains(logs, secret) {
			t.Errorf("the %s is in the log:\n%s", what, logs)
		}
	}

	status, out = e.token(url.Values{"grant_type": {"client_credentials"}, "client_id": {clientID}})
	wantOAuthError(t, "client_credentials", status, out, http.StatusBadRequest, "unsupported_grant_type")
	status, out = e.token(url.Values{"grant_type": {"authorization_code"}, "client_id": {"src_nosuch"}, "code": {"x"}, "code_verifier": {verifier}})
	if status < 400 || (out["error"] != "invalid_grant" && out["error"] != "invalid_client") {
		t.Errorf("unknown client at the token endpoint: %d %v", status, out)
	}
}

// Revoking the key ends its tokens at once: the access token is refused
// by the Verifier and the refresh token by the token endpoint.
func TestRevokedKey(t *testing.T) {
	e := newEnv(t, "", nil)
	clientID := e.register(loopbackRedirect, "authorization_code", "refresh_token")
	verifier, challenge := pkce()
	status, tok := e.exchange(clientID, loopbackRedirect, e.code(clientID, loopbackRedirect, challenge), verifier)
	if status != http.StatusOK {
		t.Fatalf("token: %d %v", status, tok)
	}
	if _, err := e.st.Revoke(context.Background(), e.key.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.Verifier().Verify(context.Background(), str(tok["access_token"])); !errors.Is(err, oauth.ErrInvalidToken) {
		t.Errorf("a revoked key's token: %v", err)
	}
	status, out := e.refresh(clientID, str(tok["refresh_token"]))
	wantOAuthError(t, "a revoked key's refresh", status, out, http.StatusBadRequest, "invalid_grant")
}

// The Verifier takes only this server's access tokens for this resource:
// not another server's, not one for another resource (from a server on
// the same database, so the same signing key and issuer), not the ID
// token op issues beside it. A restarted server (same database) still
// takes its tokens.
func TestVerifierRefuses(t *testing.T) {
	e := newEnv(t, "", nil)
	clientID := e.register(loopbackRedirect)
	verifier, challenge := pkce()
	status, tok := e.exchange(clientID, loopbackRedirect, e.code(clientID, loopbackRedirect, challenge), verifier)
	if status != http.StatusOK {
		t.Fatalf("token: %d %v", status, tok)
	}
	if _, ok := tok["refresh_token"]; ok {
		t.Error("a client registered without refresh_token got a refresh token")
	}
	at := str(tok["access_token"])

	restarted, err := New(Config{Issuer: e.issuer, Keys: e.st, State: e.st})
	if err != nil {
		t.Fatal(err)
	}
	if g, err := restarted.Verifier().Verify(context.Background(), at); err != nil || g.KeyID != e.key.ID {
		t.Errorf("after a restart: %+v, %v", g, err)
	}

	foreign := newEnv(t, "", nil)
	if _, err := foreign.srv.Verifier().Verify(context.Background(), at); !errors.Is(err, oauth.ErrInvalidToken) {
		t.Errorf("another server's token: %v", err)
	}
	otherAud, err := New(Config{Issuer: e.issuer, Resource: e.issuer + "/other", Keys: e.st, State: e.st})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := otherAud.Verifier().Verify(context.Background(), at); !errors.Is(err, oauth.ErrInvalidToken) || !strings.Contains(err.Error(), "another resource") {
		t.Errorf("a token for another resource: %v", err)
	}
	if idt := str(tok["id_token"]); idt != "" {
		if _, err := e.srv.Verifier().Verify(context.Background(), idt); !errors.Is(err, oauth.ErrInvalidToken) {
			t.Errorf("the ID token as an access token: %v", err)
		}
	}
	for _, bad := range []string{"", "x", at[:len(at)-4] + "AAAA"} {
		if _, err := e.srv.Verifier().Verify(context.Background(), bad); !errors.Is(err, oauth.ErrInvalidToken) || (bad != "" && strings.Contains(err.Error(), bad)) {
			t.Errorf("token %q: %v", bad, err)
		}
	}
}

// RFC 7009 revocation of a refresh token ends its grant; only the client
// it was issued to can revoke it.
func TestRevokeEndpoint(t *testing.T) {
	e := newEnv(t, "", nil)
	clientID := e.register(loopbackRedirect, "authorization_code", "refresh_token")
	otherID := e.register(loopbackRedirect, "authorization_code", "refresh_token")
	verifier, challenge := pkce()
	status, tok := e.exchange(clientID, loopbackRedirect, e.code(clientID, loopbackRedirect, challenge), verifier)
	if status != http.StatusOK {
		t.Fatalf("token: %d %v", status, tok)
	}
	rt := str(tok["refresh_token"])
	revoke := func(client string) {
		t.Helper()
		resp, body := e.postForm(e.issuer+pathRevoke, url.Values{"token": {rt}, "token_type_hint": {"refresh_token"}, "client_id": {client}}, nil)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("revoke as %s: %d %s", client, resp.StatusCode, body)
		}
	}
	revoke(otherID)
	status, tok = e.refresh(clientID, rt)
	if status != http.StatusOK {
		t.Fatalf("another client revoked the refresh token: %d %v", status, tok)
	}
	rt = str(tok["refresh_token"])
	revoke(clientID)
	status, out := e.refresh(clientID, rt)
	wantOAuthError(t, "a revoked refresh token", status, out, http.StatusBadRequest, "invalid_grant")
}
