// Package oauthtest is a test's OAuth-protected MCP server: a go-sdk MCP
// server with one tool (echo) behind auth.RequireBearerToken, as
// ScratchRun's /mcp is, with a small authorization server of its own on the
// same listener (RFC 9728 and RFC 8414 metadata, RFC 7591 registration,
// authorization code with PKCE S256 that redirects at once, the way a
// consent already given does, and rotating refresh tokens).
//
// No OAuth server exists in this tree yet to use instead; this one is only
// as strict as the tests of the client (oauthclient, mcpproxy,
// `scratchrun mcp`) need, and counts what it was asked.
package oauthtest

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Server is the MCP server and its authorization server; its URL is both
// the issuer and the base of the MCP endpoint URL/mcp.
type Server struct {
	*httptest.Server

	mu            sync.Mutex
	seq           int
	access        map[string]bool     // access tokens the MCP server takes
	refresh       map[string]string   // refresh token → client ID
	clients       map[string][]string // client ID → redirect URIs
	codes         map[string]codeGrant
	registrations []oauthex.ClientRegistrationMetadata
	authorizes    []url.Values
	tokenForms    []url.Values
	refreshes     int
	// Deny makes /authorize answer access_denied (set it before use).
	Deny     bool
	versions []string // Mcp-Protocol-Version of the POSTs that carried a session
}

type codeGrant struct{ client, challenge, redirect, resource string }

// NewServer starts a Server, closed when t ends.
func NewServer(t *testing.T) *Server {
	ts := &Server{access: map[string]bool{}, refresh: map[string]string{}, clients: map[string][]string{}, codes: map[string]codeGrant{}}
	server := mcp.NewServer(&mcp.Implementation{Name: "test-server", Version: "1"}, nil)
	type echoIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "echo", Description: "says it back"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
	})
	streamable := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)

	mux := http.NewServeMux()
	ts.Server = httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	base := ts.URL
	guarded := auth.RequireBearerToken(ts.verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: base + "/.well-known/oauth-protected-resource/mcp"})(streamable)
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") != "" {
			ts.mu.Lock()
			ts.versions = append(ts.versions, r.Header.Get("Mcp-Protocol-Version"))
			ts.mu.Unlock()
		}
		guarded.ServeHTTP(w, r)
	}))
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: base + "/mcp", AuthorizationServers: []string{base}, BearerMethodsSupported: []string{"header"},
	}))
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, &oauthex.AuthServerMeta{
			Issuer: base, AuthorizationEndpoint: base + "/authorize", TokenEndpoint: base + "/token", RegistrationEndpoint: base + "/register",
			ResponseTypesSupported: []string{"code"}, CodeChallengeMethodsSupported: []string{"S256"},
			GrantTypesSupported: []string{"authorization_code", "refresh_token"}, TokenEndpointAuthMethodsSupported: []string{"none"},
			AuthorizationResponseIssParameterSupported: true,
		})
	})
	mux.HandleFunc("POST /register", ts.register)
	mux.HandleFunc("GET /authorize", ts.authorize)
	mux.HandleFunc("POST /token", ts.token)
	return ts
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (ts *Server) verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if !ts.access[token] {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{UserID: "the-user", Expiration: time.Now().Add(time.Hour)}, nil
}

func (ts *Server) next(prefix string) string {
	ts.seq++
	return fmt.Sprintf("%s-%d", prefix, ts.seq)
}

// SeedGrant registers a client and issues it a refresh token, as an
// earlier run's sign-in would have.
func (ts *Server) SeedGrant() (clientID, refresh string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	clientID, refresh = ts.next("client"), ts.next("refresh")
	ts.clients[clientID] = nil
	ts.refresh[refresh] = clientID
	return clientID, refresh
}

// RevokeAccess makes the MCP server refuse every access token issued so
// far, as a server restart or a short token lifetime does.
func (ts *Server) RevokeAccess() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	clear(ts.access)
}

func (ts *Server) register(w http.ResponseWriter, r *http.Request) {
	var meta oauthex.ClientRegistrationMetadata
	if err := json.NewDecoder(r.Body).Decode(&meta); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_client_metadata"})
		return
	}
	ts.mu.Lock()
	id := ts.next("client")
	ts.clients[id] = meta.RedirectURIs
	ts.registrations = append(ts.registrations, meta)
	ts.mu.Unlock()
	writeJSON(w, http.StatusCreated, &oauthex.ClientRegistrationResponse{ClientRegistrationMetadata: meta, ClientID: id})
}

func (ts *Server) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.authorizes = append(ts.authorizes, q)
	redirect := q.Get("redirect_uri")
	if !slices.Contains(ts.clients[q.Get("client_id")], redirect) || q.Get("code_challenge_method") != "S256" {
		http.Error(w, "unknown client, redirect or PKCE method", http.StatusBadRequest)
		return
	}
	back := url.Values{"state": {q.Get("state")}, "iss": {ts.URL}}
	if ts.Deny {
		back.Set("error", "access_denied")
	} else {
		code := ts.next("code")
		ts.codes[code] = codeGrant{q.Get("client_id"), q.Get("code_challenge"), redirect, q.Get("resource")}
		back.Set("code", code)
	}
	http.Redirect(w, r, redirect+"?"+back.Encode(), http.StatusFound)
}

func (ts *Server) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request"})
		return
	}
	f := r.PostForm
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.tokenForms = append(ts.tokenForms, f)
	var client string
	switch f.Get("grant_type") {
	case "authorization_code":
		g, ok := ts.codes[f.Get("code")]
		delete(ts.codes, f.Get("code"))
		sum := sha256.Sum256([]byte(f.Get("code_verifier")))
		if !ok || g.client != f.Get("client_id") || g.redirect != f.Get("redirect_uri") ||
			base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge || f.Get("resource") != g.resource {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
			return
		}
		client = g.client
	case "refresh_token":
		c, ok := ts.refresh[f.Get("refresh_token")]
		if !ok || c != f.Get("client_id") {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
			return
		}
		delete(ts.refresh, f.Get("refresh_token")) // rotation: the old one is spent
		ts.refreshes++
		client = c
	default:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	access, refresh := ts.next("access"), ts.next("refresh")
	ts.access[access] = true
	ts.refresh[refresh] = client
	writeJSON(w, http.StatusOK, map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": 3600, "refresh_token": refresh})
}

// LiveRefresh are the refresh tokens the server would take now for client.
func (ts *Server) LiveRefresh(client string) []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []string
	for rt, c := range ts.refresh {
		if c == client {
			out = append(out, rt)
		}
	}
	return out
}

// Refreshes counts the refresh grants the token endpoint honoured.
func (ts *Server) Refreshes() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.refreshes
}

// Registrations are the clients' registration requests, in order.
func (ts *Server) Registrations() []oauthex.ClientRegistrationMetadata {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.registrations)
}

// Authorizations are the authorization requests' queries, in order.
func (ts *Server) Authorizations() []url.Values {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.authorizes)
}

// Versions are the Mcp-Protocol-Version headers of the MCP POSTs that
// carried a session (those after the handshake).
func (ts *Server) Versions() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.versions)
}
