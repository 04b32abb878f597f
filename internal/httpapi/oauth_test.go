package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/scratchrun/scratchrun/internal/oauth"
)

// tokenTable is a Verifier of the test's own: each token it knows is a
// grant, any other is invalid. It counts what it was asked, so a test can
// see that an API key never reaches it.
type tokenTable struct {
	mu     sync.Mutex
	grants map[string]oauth.Grant
	asked  []string
}

func (tt *tokenTable) Verify(_ context.Context, token string) (oauth.Grant, error) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	tt.asked = append(tt.asked, token)
	g, ok := tt.grants[token]
	if !ok {
		return oauth.Grant{}, oauth.Invalid("the token is not one this test issued")
	}
	return g, nil
}

func (tt *tokenTable) wasAsked(token string) bool {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	for _, a := range tt.asked {
		if a == token {
			return true
		}
	}
	return false
}

const testResource = "https://scratchrun.test/mcp"

func startOAuthServer(t *testing.T, tt *tokenTable) *testServer {
	t.Helper()
	return startServer(t, oauthOptions(tt))
}

// oauthOptions are startOAuthServer's: every optional route mounted.
func oauthOptions(tt *tokenTable) serverOptions {
	return serverOptions{mcp: true, fake: scripted(), oauth: &OAuth{
		Resource: testResource, AuthorizationServers: []string{"https://issuer.test"}, Scopes: []string{"scratchrun"}, Verifier: tt,
		Routes: map[string]http.Handler{"GET /oauth/hello": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("as")) })},
	}}
}

func TestOAuthChallengeNamesTheMetadata(t *testing.T) {
	tt := &tokenTable{}
	ts := startOAuthServer(t, tt)
	ts.key("someone", 60, 4) // keys exist: the server is not open
	const meta = `resource_metadata="https://scratchrun.test/.well-known/oauth-protected-resource/mcp"`
	for _, c := range []struct {
		name, auth, path string
		status           int
		want, not        []string
	}{
		{"no token", "", "/mcp", 401, []string{meta, `scope="scratchrun"`}, []string{"error="}},
		{"unknown token", "Bearer eyJunknown", "/mcp", 401, []string{`error="invalid_token"`, meta, `error_description="the token is not one this test issued"`}, nil},
		{"unknown key", "Bearer sr_live_nosuchkey", "/mcp", 401, []string{`error="invalid_token"`, meta}, nil},
		{"token in the query", "", "/mcp?access_token=eyJx", 400, []string{`error="invalid_request"`, meta}, nil},
		{"REST keeps its realm", "", "/v1/runtimes", 401, []string{`realm="scratchrun"`}, []string{"resource_metadata"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
			if c.auth != "" {
				h["Authorization"] = c.auth
			}
			method := http.MethodPost
			if strings.HasPrefix(c.path, "/v1") {
				method = http.MethodGet
			}
			a, err := ts.do(context.Background(), method, c.path, "", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), h)
			if err != nil {
				t.Fatal(err)
			}
			got := a.header.Get("WWW-Authenticate")
			if a.status != c.status || !strings.HasPrefix(got, "Bearer ") {
				t.Fatalf("status %d, WWW-Authenticate %q; want %d and a Bearer challenge", a.status, got, c.status)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("WWW-Authenticate %q lacks %s", got, w)
				}
			}
			for _, n := range c.not {
				if strings.Contains(got, n) {
					t.Errorf("WWW-Authenticate %q has %s", got, n)
				}
			}
			a.errorBody(t)
		})
	}
	if tt.wasAsked("sr_live_nosuchkey") {
		t.Error("an API key was sent to the token verifier")
	}
}

func TestOAuthMetadataAndRoutes(t *testing.T) {
	ts := startOAuthServer(t, &tokenTable{})
	ts.key("someone", 60, 4)
	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		a, err := ts.do(context.Background(), http.MethodGet, path, "", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var doc oauthex.ProtectedResourceMetadata
		if a.status != 200 || json.Unmarshal(a.body, &doc) != nil {
			t.Fatalf("%s: %d %s", path, a.status, a.body)
		}
		if doc.Resource != testResource || len(doc.AuthorizationServers) != 1 || doc.AuthorizationServers[0] != "https://issuer.test" ||
			strings.Join(doc.ScopesSupported, " ") != "scratchrun" || strings.Join(doc.BearerMethodsSupported, " ") != "header" {
			t.Errorf("%s: %+v", path, doc)
		}
	}
	a, err := ts.do(context.Background(), http.MethodGet, "/oauth/hello", "", nil, nil)
	if err != nil || a.status != 200 || string(a.body) != "as" {
		t.Fatalf("a route of OAuth.Routes: %d %q %v", a.status, a.body, err)
	}
}

// A token acts as its key: the run is the key's, the key's rate holds it,
// and revoking the key ends the token at once.
func TestOAuthTokenActsAsItsKey(t *testing.T) {
	tt := &tokenTable{grants: map[string]oauth.Grant{}}
	ts := startOAuthServer(t, tt)
	k, _ := ts.key("connector", 2, 4)
	exp := time.Now().Add(time.Hour)
	tt.grants["good"] = oauth.Grant{KeyID: k.ID, Subject: k.ID, Scopes: []string{"scratchrun"}, Expiry: exp}
	tt.grants["narrow"] = oauth.Grant{KeyID: k.ID, Scopes: []string{"other"}, Expiry: exp}
	connect := func(token string) (*mcp.ClientSession, error) {
		client := mcp.NewClient(&mcp.Implementation{Name: "oauth-test", Version: "1"}, nil)
		return client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp",
			HTTPClient: &http.Client{Transport: bearerKey(token)}, MaxRetries: -1}, nil)
	}
	cs, err := connect("good")
	if err != nil {
		t.Fatalf("a good token: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "scratchrun_exec", Arguments: map[string]any{"runtime": "bash", "code": "echo hi"}})
	if err != nil || res.IsError {
		t.Fatalf("tool call with a token: %v %+v", err, res)
	}
	ran := ts.fake.Ran()
	if len(ran) != 1 || ran[0].Caller != k.ID {
		t.Fatalf("runs %+v: want one, the key's", ran)
	}
	// The key allows 2 a minute: the session took one, the run another.
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "scratchrun_exec", Arguments: map[string]any{"runtime": "bash", "code": "echo again"}})
	if err == nil && !res.IsError {
		t.Fatal("a third spend of a 2/min key went through a token")
	}
	if _, err := connect("narrow"); err == nil {
		t.Fatal("a token without the scope opened a session")
	}
	a, err := ts.do(context.Background(), http.MethodPost, "/mcp", "", strings.NewReader(`{}`), map[string]string{"Authorization": "Bearer narrow", "Content-Type": "application/json"})
	if err != nil || a.status != 403 || !strings.Contains(a.header.Get("WWW-Authenticate"), `error="insufficient_scope"`) || a.errorBody(t).Code != CodeInsufficientScope {
		t.Fatalf("a token without the scope: %d %q %v", a.status, a.header.Get("WWW-Authenticate"), err)
	}
	// The REST API takes keys, never tokens: their audience is /mcp.
	if a := ts.post("good", `{"runtime":"bash","code":"echo hi"}`); a.status != 401 {
		t.Fatalf("a token on /v1/exec: %d, want 401", a.status)
	}
	if _, err := ts.keys.Revoke(context.Background(), k.ID); err != nil {
		t.Fatal(err)
	}
	a, err = ts.do(context.Background(), http.MethodPost, "/mcp", "", strings.NewReader(`{}`), map[string]string{"Authorization": "Bearer good", "Content-Type": "application/json"})
	if err != nil || a.status != 401 || !strings.Contains(a.header.Get("WWW-Authenticate"), "revoked") {
		t.Fatalf("a token of a revoked key: %d %q %v", a.status, a.header.Get("WWW-Authenticate"), err)
	}
}

// API keys keep working on /mcp with OAuth on, and never reach the verifier.
func TestOAuthKeepsAPIKeys(t *testing.T) {
	tt := &tokenTable{}
	ts := startOAuthServer(t, tt)
	_, apiKey := ts.key("static", 60, 4)
	client := mcp.NewClient(&mcp.Implementation{Name: "oauth-key-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearerKey(apiKey)}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("an API key on /mcp with OAuth on: %v", err)
	}
	cs.Close()
	if tt.wasAsked(apiKey) {
		t.Fatal("the API key was sent to the token verifier")
	}
}

func TestOAuthConfigIsChecked(t *testing.T) {
	svc := scripted()
	for _, c := range []struct {
		o    OAuth
		want string
	}{
		{OAuth{Resource: "scratchrun.test/mcp", AuthorizationServers: []string{"x"}, Verifier: &tokenTable{}}, "OAuth.Resource"},
		{OAuth{Resource: "https://h/mcp#f", AuthorizationServers: []string{"x"}, Verifier: &tokenTable{}}, "OAuth.Resource"},
		{OAuth{Resource: "https://h/mcp", Verifier: &tokenTable{}}, "OAuth.AuthorizationServers"},
		{OAuth{Resource: "https://h/mcp", AuthorizationServers: []string{"x"}}, "OAuth.Verifier"},
	} {
		o := c.o
		_, err := New(Config{Service: svc, Policy: svc.Policy(), Keys: nil, OAuth: &o})
		if err == nil {
			t.Fatalf("%+v: accepted", c.o)
		}
		ts := startServer(t, serverOptions{fake: scripted()})
		_, err = New(Config{Service: svc, Policy: svc.Policy(), Keys: ts.keys, OAuth: &o})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.o, err, c.want)
		}
	}
}

// Behind a TLS proxy the browser's Origin is the public URL's, and the
// proxy may pass its Host on: both are this server's. The metadata and
// the routes named AnyOrigin take any origin (browser-based clients); the
// others still refuse a foreign one.
func TestOAuthPublicURLBehindAProxy(t *testing.T) {
	tt := &tokenTable{}
	ts := startServer(t, serverOptions{mcp: true, fake: scripted(), oauth: &OAuth{
		Resource: testResource, AuthorizationServers: []string{"https://scratchrun.test"}, Scopes: []string{"scratchrun"}, Verifier: tt,
		PublicURL: "https://scratchrun.test", AnyOrigin: []string{"/oauth/token"},
		Routes: map[string]http.Handler{
			"/oauth/token":   http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("token")) }),
			"/oauth/consent": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("consent")) }),
		},
	}})
	ts.key("someone", 60, 4)
	for _, c := range []struct {
		name, method, path string
		header             map[string]string
		status             int
	}{
		{"the proxy's origin", "POST", "/oauth/consent", map[string]string{"Origin": "https://scratchrun.test"}, 200},
		{"the proxy's origin and host", "POST", "/oauth/consent", map[string]string{"Origin": "https://scratchrun.test", "Host": "scratchrun.test"}, 200},
		{"the proxy's origin, its port written", "POST", "/oauth/consent", map[string]string{"Origin": "https://scratchrun.test:443"}, 200},
		{"another origin on the consent page", "POST", "/oauth/consent", map[string]string{"Origin": "https://evil.example"}, 403},
		{"plain http for the public origin", "POST", "/oauth/consent", map[string]string{"Origin": "http://scratchrun.test"}, 403},
		{"another host", "POST", "/oauth/consent", map[string]string{"Host": "evil.example"}, 403},
		{"any origin at the token endpoint", "POST", "/oauth/token", map[string]string{"Origin": "https://app.example", "Sec-Fetch-Site": "cross-site"}, 200},
		{"any origin at the metadata", "GET", "/.well-known/oauth-protected-resource/mcp", map[string]string{"Origin": "https://app.example"}, 200},
		{"a foreign origin at /mcp", "POST", "/mcp", map[string]string{"Origin": "https://app.example"}, 403},
	} {
		a := ts.request(t, c.method, c.path, "", c.header)
		if a.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, a.status, a.body, c.status)
		}
	}
}
