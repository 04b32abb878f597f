package authserver

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
	"github.com/scratchrun/scratchrun/internal/httpapi"
	"github.com/scratchrun/scratchrun/internal/mcpserver"
	"github.com/scratchrun/scratchrun/internal/store"
	"github.com/scratchrun/scratchrun/internal/testenv"
	"github.com/scratchrun/scratchrun/internal/testenv/mcpnode"
)

// The official TypeScript SDK registers by a client ID metadata document
// (dynamic registration is off, so nothing else could work): the server
// fetches the document the SDK names, over TLS, and the SDK signs in and
// runs code through the real resource server (httpapi) in front of it.
// The document is only known once the SDK's loopback callback is.
func TestTypeScriptSDKWithMetadataDocument(t *testing.T) {
	testenv.SkipIfShort(t, "runs node")
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "keys.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, secret, err := st.CreateKey(ctx, store.NewKey{Name: "person", RatePerMin: 60, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var callback string
	docs := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"client_id": "https://" + r.Host + r.URL.Path, "client_name": "SDK by document",
			"redirect_uris": []string{callback}, "grant_types": []string{"authorization_code", "refresh_token"}, "token_endpoint_auth_method": "none"})
	}))
	defer docs.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String()
	as, err := New(Config{Issuer: issuer, Keys: st, State: st, Registration: false, MetadataClient: docs.Client()})
	if err != nil {
		t.Fatal(err)
	}
	svc := execapitest.New("bash")
	svc.Respond(func(_ context.Context, c execapitest.Call) execapitest.Response {
		out := strings.TrimPrefix(c.Checked.Code, "echo ") + "\n"
		return execapitest.Response{Result: execapitest.Exit(0, out, execapi.Facts{})}
	})
	srv, err := httpapi.New(httpapi.Config{Service: svc, Policy: svc.Policy(), Keys: st,
		MCP: func(s execapi.Service) http.Handler { return mcpserver.HTTPHandler(s, mcpserver.Options{}) },
		OAuth: &httpapi.OAuth{Resource: issuer + "/mcp", AuthorizationServers: []string{issuer}, Scopes: []string{"scratchrun"},
			Verifier: as.Verifier(), Routes: as.Routes()}})
	if err != nil {
		t.Fatal(err)
	}
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(serveCtx, ln) }()
	defer func() { stop(); <-served }()

	n := mcpnode.StartOAuthClient(t, issuer+"/mcp", "--cimd", docs.URL+"/sdk-client.json")
	mu.Lock()
	callback = n.Next("CALLBACK")
	mu.Unlock()
	authURL := n.Next("AUTHORIZE")
	if !strings.Contains(authURL, "client_id="+url.QueryEscape(docs.URL+"/sdk-client.json")) {
		t.Fatalf("the SDK did not use its document as client_id: %s", authURL)
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	page := follow(t, browser, authURL)
	id, csrf := field(t, page, "id"), field(t, page, "csrf")
	form := url.Values{"id": {id}, "csrf": {csrf}, "api_key": {secret}, "action": {"allow"}}
	req, _ := http.NewRequest(http.MethodPost, issuer+pathConsent, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", issuer)
	resp, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back := resp.Header.Get("Location")
	for i := 0; i < 5 && back != "" && !strings.HasPrefix(back, callback); i++ {
		u, _ := url.Parse(issuer)
		next, _ := u.Parse(back)
		r, err := browser.Get(next.String())
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		back = r.Header.Get("Location")
	}
	if !strings.HasPrefix(back, callback+"?") {
		t.Fatalf("consent led to %q, not the SDK's callback", back)
	}
	r, err := http.Get(back)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if res := n.Next("RESULT"); !strings.Contains(res, "oauth-ok") {
		t.Fatalf("tool result: %s", res)
	}
	n.Wait()
}

// follow GETs u and its redirects on this server and returns the page.
func follow(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	for range 5 {
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		buf := make([]byte, 32<<10)
		for {
			k, err := resp.Body.Read(buf)
			b.Write(buf[:k])
			if err != nil {
				break
			}
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if loc == "" {
			return b.String()
		}
		base, _ := url.Parse(u)
		next, _ := base.Parse(loc)
		u = next.String()
	}
	t.Fatalf("more than 5 redirects from %s", u)
	return ""
}

// field reads a hidden input's value from a page.
func field(t *testing.T, page, name string) string {
	t.Helper()
	m := regexp.MustCompile(`name="` + name + `" value="([^"]*)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no %s field on the page: %s", name, page)
	}
	return m[1]
}
