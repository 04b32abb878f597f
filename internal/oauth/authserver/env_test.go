package authserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/scratchrun/scratchrun/internal/store"
)

// env is a server on loopback over a real SQLite store, with one key, and
// a client that follows no redirect (each step is looked at).
type env struct {
	t      *testing.T
	st     *store.Store
	srv    *Server
	ts     *httptest.Server
	issuer string
	key    store.Key
	secret string
	hc     *http.Client
	logs   *syncBuffer
}

// syncBuffer collects log output from the handlers' goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newEnv starts a server; dbPath "" is a new database. The server's own
// logger and slog's default (where zitadel's op logs) both go to e.logs.
func newEnv(t *testing.T, dbPath string, edit func(*Config)) *env {
	t.Helper()
	if dbPath == "" {
		dbPath = filepath.Join(t.TempDir(), "keys.db")
	}
	st, err := store.Open(context.Background(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{t: t, st: st, logs: &syncBuffer{}}
	logger := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	old := slog.Default()
	slog.SetDefault(logger)
	t.Cleanup(func() { slog.SetDefault(old) })

	mux := http.NewServeMux()
	e.ts = httptest.NewUnstartedServer(mux)
	e.issuer = "http://" + e.ts.Listener.Addr().String()
	cfg := Config{Issuer: e.issuer, Keys: st, State: st, Registration: true, Logger: logger}
	if edit != nil {
		edit(&cfg)
	}
	if e.srv, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	for pattern, h := range e.srv.Routes() {
		mux.Handle(pattern, h)
	}
	e.ts.Start()
	t.Cleanup(e.ts.Close)
	e.key, e.secret, err = st.CreateKey(context.Background(), store.NewKey{Name: "person", RatePerMin: 10, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The browser keeps cookies: the consent page needs the one its
	// authorization request set.
	jar, _ := cookiejar.New(nil)
	e.hc = &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return e
}

func (e *env) do(req *http.Request) (*http.Response, string) {
	e.t.Helper()
	resp, err := e.hc.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func (e *env) get(u string) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.do(req)
}

func (e *env) postForm(u string, form url.Values, header map[string]string) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return e.do(req)
}

// register registers a client by RFC 7591 and returns its id.
func (e *env) register(redirect string, grants ...string) string {
	e.t.Helper()
	body, _ := json.Marshal(map[string]any{
		"client_name": "Test client", "redirect_uris": []string{redirect},
		"token_endpoint_auth_method": "none", "grant_types": grants,
	})
	resp, err := http.Post(e.issuer+pathRegister, "application/json", bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		ClientID string `json:"client_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated || out.ClientID == "" {
		e.t.Fatalf("register: %d, %v, %+v", resp.StatusCode, err, out)
	}
	return out.ClientID
}

// pkce is a verifier and its S256 challenge.
func pkce() (verifier, challenge string) {
	verifier = randomToken(32)
	sum := sha256.Sum256([]byte(verifier))
	return verifier, base64.RawURLEncoding.EncodeToString(sum[:])
}

// authQuery is a valid authorization request's query.
func (e *env) authQuery(clientID, redirect, challenge string) url.Values {
	return url.Values{
		"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirect},
		"state": {"st-1"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"},
		"resource": {e.issuer + "/mcp"},
	}
}

// authorize sends the request and returns the consent page's request id
// (the redirect op answers with).
func (e *env) authorize(q url.Values) string {
	e.t.Helper()
	resp, body := e.get(e.issuer + pathAuthorize + "?" + q.Encode())
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, e.issuer+pathConsent+"?") {
		e.t.Fatalf("authorize: %d to %q: %s", resp.StatusCode, loc, body)
	}
	u, _ := url.Parse(loc)
	return u.Query().Get("id")
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// consentPage shows the page and returns its CSRF token and the page.
func (e *env) consentPage(id string) (string, string) {
	e.t.Helper()
	resp, body := e.get(e.issuer + pathConsent + "?id=" + url.QueryEscape(id))
	m := csrfField.FindStringSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil {
		e.t.Fatalf("consent page: %d: %s", resp.StatusCode, body)
	}
	return m[1], body
}

// sameOrigin are the headers a browser sends with the consent form.
func (e *env) sameOrigin() map[string]string {
	return map[string]string{"Origin": e.issuer, "Sec-Fetch-Site": "same-origin"}
}

func (e *env) postConsent(id, csrf, key, action string, header map[string]string) (*http.Response, string) {
	e.t.Helper()
	return e.postForm(e.issuer+pathConsent, url.Values{"id": {id}, "csrf": {csrf}, "api_key": {key}, "action": {action}}, header)
}

// clientRedirect is where the consent's answer sends the browser back to
// the client.
func (e *env) clientRedirect(resp *http.Response, body string) *url.URL {
	e.t.Helper()
	u, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || err != nil || strings.HasPrefix(u.String(), e.issuer) {
		e.t.Fatalf("consent: %d to %q, want a redirect to the client: %s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	return u
}

// code runs the flow to the code the client receives.
func (e *env) code(clientID, redirect, challenge string) string {
	e.t.Helper()
	id := e.authorize(e.authQuery(clientID, redirect, challenge))
	csrf, _ := e.consentPage(id)
	back := e.clientRedirect(e.postConsent(id, csrf, e.secret, "allow", e.sameOrigin()))
	q := back.Query()
	if !strings.HasPrefix(back.String(), redirect+"?") || q.Get("code") == "" || q.Get("state") != "st-1" || q.Get("iss") != e.issuer {
		e.t.Fatalf("back to the client at %s", back)
	}
	return q.Get("code")
}

// token posts to the token endpoint and returns the status and the JSON.
func (e *env) token(form url.Values) (int, map[string]any) {
	e.t.Helper()
	resp, body := e.postForm(e.issuer+pathToken, form, nil)
	var out map[string]any
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		e.t.Fatalf("token answer %d is not JSON: %s", resp.StatusCode, body)
	}
	return resp.StatusCode, out
}

func (e *env) exchange(clientID, redirect, code, verifier string) (int, map[string]any) {
	e.t.Helper()
	return e.token(url.Values{
		"grant_type": {"authorization_code"}, "client_id": {clientID}, "redirect_uri": {redirect},
		"code": {code}, "code_verifier": {verifier}, "resource": {e.issuer + "/mcp"},
	})
}

func (e *env) refresh(clientID, rt string) (int, map[string]any) {
	e.t.Helper()
	return e.token(url.Values{"grant_type": {"refresh_token"}, "client_id": {clientID}, "refresh_token": {rt}, "resource": {e.issuer + "/mcp"}})
}

// wantOAuthError checks a JSON OAuth error.
func wantOAuthError(t *testing.T, what string, status int, out map[string]any, wantStatus int, code string) {
	t.Helper()
	if status != wantStatus || out["error"] != code || out["error_description"] == nil {
		t.Errorf("%s: %d %v, want %d %s with a description", what, status, out, wantStatus, code)
	}
}

func str(v any) string { s, _ := v.(string); return s }
