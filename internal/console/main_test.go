package console

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
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
	"github.com/scratchrun/scratchrun/internal/store"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// These tests run the console on a real server (httpapi, on 127.0.0.1,
// with GuardOrigin in front of every route as `scratchrun serve` has it)
// over a real SQLite key store and a scripted service (execapitest), so
// that its rules are checked in milliseconds without a browser or
// sandboxes. The browser tests (cmd/scratchrun) drive the same pages in
// Chromium over the real engine.

const testToken = "operator-token-for-tests-0123456789"

// clock is a settable time for sessions and throttling.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// testConsole is a server with a console.
type testConsole struct {
	t     *testing.T
	URL   string
	keys  *store.Store
	fake  *execapitest.Service
	srv   *httpapi.Server
	clock *clock
}

type consoleOptions struct {
	// admission, when set, is how the service's admission stands (as the
	// engine reports it); unset, the service has none (a remote one).
	admission *execapi.AdmissionInfo
	// respond scripts the service (default: success, printing nothing).
	respond func(ctx context.Context, c execapitest.Call) execapitest.Response
	// pools, when set, is the service's warm pool (as the engine reports
	// it); unset, it keeps none.
	pools map[execapi.PoolKey]int
	// sessions offers the Sessions page over the test's store, and
	// sessionAdmin (when set) the server's own sessions.
	sessions     bool
	sessionAdmin execapi.SessionAdmin
}

func startConsole(t *testing.T, o consoleOptions) *testConsole {
	t.Helper()
	keys, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "keys.db"))
	if err != nil {
		t.Fatal(err)
	}
	fake := execapitest.New("bash", "python3.13")
	if o.respond != nil {
		fake.Respond(o.respond)
	}
	clk := &clock{t: time.Now()}
	cfg := Config{Token: testToken, Keys: keys, now: clk.now}
	if o.sessions {
		cfg.Sessions, cfg.SessionAdmin = keys, o.sessionAdmin
	}
	con, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var svc execapi.Service = fake
	if o.admission != nil {
		svc = admittingService{fake, *o.admission}
	}
	if o.pools != nil {
		if o.admission != nil {
			t.Fatal("startConsole: a scripted service reports admission or a pool, not both")
		}
		svc = pooledService{fake, o.pools}
	}
	srv, err := httpapi.New(httpapi.Config{Service: svc, Policy: fake.Policy(), Keys: keys, Console: con.Mount})
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, run last: the keys outlive the server.
	t.Cleanup(func() { keys.Close() })
	serverURL := testenv.ServeLoopback(t, srv.Serve)
	return &testConsole{t: t, URL: serverURL, keys: keys, fake: fake, srv: srv, clock: clk}
}

// browser is a client with a cookie jar that does not follow redirects
// (tests look at them).
type browser struct {
	t    *testing.T
	tc   *testConsole
	c    *http.Client
	csrf string
}

func (tc *testConsole) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: tc.t, tc: tc, c: &http.Client{
		Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

type reply struct {
	status int
	header http.Header
	body   string
}

// do sends a request; header values override the defaults.
func (b *browser) do(method, path, contentType, body string, header map[string]string) reply {
	b.t.Helper()
	req, err := http.NewRequest(method, b.tc.URL+path, strings.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(data)}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// signinForm loads the sign-in page and returns its CSRF token.
func (b *browser) signinForm() string {
	b.t.Helper()
	r := b.do(http.MethodGet, "/console/signin", "", "", nil)
	m := csrfField.FindStringSubmatch(r.body)
	if r.status != http.StatusOK || m == nil {
		b.t.Fatalf("sign-in page: %d %s", r.status, r.body)
	}
	return m[1]
}

// submitSignin posts the sign-in form.
func (b *browser) submitSignin(csrf, token string) reply {
	b.t.Helper()
	form := url.Values{"csrf": {csrf}, "token": {token}}
	return b.do(http.MethodPost, "/console/signin", "application/x-www-form-urlencoded", form.Encode(), nil)
}

// signIn signs in with the operator token and reads the session's CSRF
// token.
func (b *browser) signIn() {
	b.t.Helper()
	r := b.submitSignin(b.signinForm(), testToken)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/" {
		b.t.Fatalf("sign-in: %d %v %s", r.status, r.header, r.body)
	}
	var s sessionInfo
	b.getJSON("/console/api/session", &s)
	if s.CSRF == "" {
		b.t.Fatal("the session has no CSRF token")
	}
	b.csrf = s.CSRF
}

// getJSON GETs path and decodes a 200 answer into v.
func (b *browser) getJSON(path string, v any) {
	b.t.Helper()
	r := b.do(http.MethodGet, path, "", "", nil)
	if r.status != http.StatusOK {
		b.t.Fatalf("GET %s: %d %s", path, r.status, r.body)
	}
	if err := json.Unmarshal([]byte(r.body), v); err != nil {
		b.t.Fatalf("GET %s: %v in %s", path, err, r.body)
	}
}

// post sends JSON with the session's CSRF token, as the pages do.
func (b *browser) post(path, body string) reply {
	b.t.Helper()
	return b.do(http.MethodPost, path, "application/json", body, map[string]string{csrfHeader: b.csrf})
}

// errorOf decodes an error document.
func errorOf(t *testing.T, r reply) httpapi.ErrorDetail {
	t.Helper()
	var doc httpapi.ErrorDocument
	if err := json.Unmarshal([]byte(r.body), &doc); err != nil || doc.Error.Code == "" {
		t.Fatalf("status %d: not an error document: %s", r.status, r.body)
	}
	return doc.Error
}

// cookie returns the Set-Cookie of name in r, or nil.
func cookie(r reply, name string) *http.Cookie {
	for _, line := range r.header.Values("Set-Cookie") {
		if c, err := http.ParseSetCookie(line); err == nil && c.Name == name {
			return c
		}
	}
	return nil
}

// admittingService is a scripted service that reports an admission of its
// own, as the engine does.
type admittingService struct {
	*execapitest.Service
	info execapi.AdmissionInfo
}

// Admission reports the scripted admission state.
func (s admittingService) Admission() execapi.AdmissionInfo { return s.info }

// pooledService is a service that reports a warm pool, as the engine does.
type pooledService struct {
	*execapitest.Service
	pools map[execapi.PoolKey]int
}

// PoolStats reports the scripted pool.
func (s pooledService) PoolStats() map[execapi.PoolKey]int { return s.pools }
