package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/testenv/hydra"
	"github.com/scratchrun/scratchrun/internal/testenv/mcpnode"
)

// With an authorization server the operator runs (a real Ory Hydra), the
// official TypeScript SDK finds it from /mcp's challenge, registers,
// signs in and runs code as the key the rule names; tokens for another
// audience, from another issuer, or in the query string are refused.
func TestServeOAuthWithExternalServer(t *testing.T) {
	h := hydra.Start(t, hydra.Options{Subject: "alice"})
	other := hydra.Start(t, hydra.Options{Subject: "alice"})
	db := filepath.Join(t.TempDir(), "keys.db")
	createKey(t, db, "alice-key")
	cc := h.CreateClient(t, hydra.Client{GrantTypes: []string{"client_credentials"}, Scope: "scratchrun", Audience: []string{"https://other.example/mcp"}})
	srv := startServeEnv(t, []string{"SCRATCHRUN_OAUTH=external", "SCRATCHRUN_OAUTH_ISSUER=" + h.PublicURL,
		"SCRATCHRUN_OAUTH_KEYS=sub:alice=alice-key,client:" + cc.ID + "=alice-key"}, "--db", db)
	mcpURL := srv.url + "/mcp"

	n := mcpnode.StartOAuthClient(t, mcpURL)
	callback := n.Next("CALLBACK")
	authURL := n.Next("AUTHORIZE")
	if !strings.HasPrefix(authURL, h.PublicURL+"/oauth2/auth?") || !strings.Contains(authURL, "resource=") || !strings.Contains(authURL, "code_challenge_method=S256") {
		t.Fatalf("the SDK went to %s: want Hydra's authorization endpoint, with the resource and S256", authURL)
	}
	mcpnode.Deliver(t, callback, h.FollowAuthorization(t, authURL, callback).Encode())
	if res := n.Next("RESULT"); !strings.Contains(res, "oauth-ok") {
		t.Fatalf("tool result after sign-in: %s", res)
	}
	n.Wait()

	refused := func(what, token, query, want string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, mcpURL+query, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		challenge := resp.Header.Get("WWW-Authenticate")
		if resp.StatusCode/100 != 4 || !strings.Contains(challenge, want) || !strings.Contains(challenge, `resource_metadata="`+srv.url+`/.well-known/oauth-protected-resource/mcp"`) {
			t.Errorf("%s: %d %q, want a refusal naming %q and the metadata", what, resp.StatusCode, challenge, want)
		}
	}
	otherAudience := h.ClientCredentials(t, cc, "scratchrun", "https://other.example/mcp")
	refused("a token for another audience", otherAudience.AccessToken, "", "audience")
	occ := other.CreateClient(t, hydra.Client{GrantTypes: []string{"client_credentials"}, Scope: "scratchrun", Audience: []string{mcpURL}})
	refused("a token from another issuer", other.ClientCredentials(t, occ, "scratchrun", mcpURL).AccessToken, "", "issuer")
	refused("a token in the query string", "", "?access_token="+otherAudience.AccessToken, `error="invalid_request"`)
	refused("no token", "", "", `scope="scratchrun"`)
}
