package console

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
	"github.com/scratchrun/scratchrun/internal/httpapi"
	"github.com/scratchrun/scratchrun/internal/store"
)

// A token must be long enough and must not be an API key.
func TestTokenChecks(t *testing.T) {
	for token, want := range map[string]string{
		"short":                      "at least 16",
		"sr_live_0123456789abcdefgh": "looks like an API key",
		" leading-space-token-0123":  "spaces",
		"line\nbreak-in-the-token-0": "line breaks",
	} {
		if err := CheckToken(token); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckToken(%q) = %v, want an error saying %q", token, err, want)
		}
		if _, err := New(Config{Token: token}); err == nil {
			t.Errorf("New took the token %q", token)
		}
	}
	if err := CheckToken(testToken); err != nil {
		t.Errorf("a good token: %v", err)
	}
}

// Without a session nothing is shown but the sign-in page; a wrong token,
// an API key and a form that did not come from the sign-in page are
// refused without a session; the operator token gets one, in an HttpOnly,
// SameSite=Strict cookie (not Secure over plain HTTP).
func TestSignInRules(t *testing.T) {
	tc := startConsole(t, consoleOptions{})
	_, apiKey, err := tc.keys.CreateKey(context.Background(), store.NewKey{Name: "agent", RatePerMin: 60, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	b := tc.browser()
	if r := b.do(http.MethodGet, "/console/", "", "", nil); r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/signin" {
		t.Errorf("console without a session: %d to %q", r.status, r.header.Get("Location"))
	}
	if r := b.do(http.MethodGet, "/console", "", "", nil); r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/" {
		t.Errorf("/console: %d to %q", r.status, r.header.Get("Location"))
	}
	for _, path := range []string{"/console/api/keys", "/console/api/usage", "/console/api/live", "/console/api/runs.csv", "/console/api/session"} {
		if r := b.do(http.MethodGet, path, "", "", nil); r.status != http.StatusUnauthorized || errorOf(t, r).Code != codeSignedOut {
			t.Errorf("GET %s without a session: %d %s", path, r.status, r.body)
		}
	}
	// Not even the API key's bearer header opens the console's API.
	if r := b.do(http.MethodGet, "/console/api/keys", "", "", map[string]string{"Authorization": "Bearer " + apiKey}); r.status != http.StatusUnauthorized {
		t.Errorf("the console's API with an API key: %d", r.status)
	}

	for name, token := range map[string]string{"wrong token": testToken + "x", "API key": apiKey, "empty": ""} {
		r := b.submitSignin(b.signinForm(), token)
		if r.status != http.StatusUnauthorized || cookie(r, sessionCookie) != nil {
			t.Errorf("%s: %d, session cookie %v", name, r.status, cookie(r, sessionCookie))
		}
		if name == "API key" && !strings.Contains(r.body, "API keys cannot sign in") {
			t.Errorf("an API key's refusal does not say why: %s", r.body)
		}
		if strings.Contains(r.body, token) && token != "" {
			t.Errorf("%s: the page echoes what was typed", name)
		}
	}
	if r := b.do(http.MethodGet, "/console/api/keys", "", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("after refused sign-ins the API answers %d", r.status)
	}

	// The form's CSRF token must be the one its page set in a cookie.
	fresh := tc.browser()
	csrf := b.signinForm()
	if r := fresh.submitSignin(csrf, testToken); r.status != http.StatusForbidden || cookie(r, sessionCookie) != nil {
		t.Errorf("sign-in with another browser's form token: %d", r.status)
	}
	b.signinForm()
	if r := b.submitSignin("", testToken); r.status != http.StatusForbidden || cookie(r, sessionCookie) != nil {
		t.Errorf("sign-in without the form token: %d", r.status)
	}

	r := b.submitSignin(b.signinForm(), testToken)
	c := cookie(r, sessionCookie)
	if r.status != http.StatusSeeOther || c == nil {
		t.Fatalf("sign-in with the operator token: %d %v", r.status, r.header)
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.Path != "/console" || len(c.Value) < 40 {
		t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/console, not Secure over HTTP, a long random value", c)
	}
	if r := b.do(http.MethodGet, "/console/", "", "", nil); r.status != http.StatusOK || !strings.Contains(r.body, `id="page-keys"`) {
		t.Errorf("console after sign-in: %d", r.status)
	}
	if r := b.do(http.MethodGet, "/console/signin", "", "", nil); r.status != http.StatusSeeOther {
		t.Errorf("sign-in page with a session: %d, want a redirect to the console", r.status)
	}
}

// Over TLS (or behind a proxy that says the browser used it) the cookies
// are Secure and __Host- prefixed.
func TestCookiesSecureOverTLS(t *testing.T) {
	keys, err := store.Open(context.Background(), t.TempDir()+"/keys.db")
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	con, err := New(Config{Token: testToken, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	fake := execapitest.New("bash")
	ts := httptest.NewTLSServer(con.Mount(fake, func() httpapi.Live { return httpapi.Live{} }))
	defer ts.Close()
	jar, _ := cookiejar.New(nil)
	client := ts.Client()
	client.Jar = jar
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	client.Transport.(*http.Transport).TLSClientConfig = &tls.Config{InsecureSkipVerify: true}

	resp, err := client.Get(ts.URL + "/console/signin")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	form := cookieOf(resp, "__Host-"+signinCookie)
	if form == nil || !form.Secure || form.Path != "/" || !form.HttpOnly {
		t.Fatalf("sign-in cookie over TLS: %+v", form)
	}
	m := csrfField.FindStringSubmatch(body)
	resp, err = client.PostForm(ts.URL+"/console/signin", url.Values{"csrf": {m[1]}, "token": {testToken}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	sess := cookieOf(resp, "__Host-"+sessionCookie)
	if resp.StatusCode != http.StatusSeeOther || sess == nil || !sess.Secure || !sess.HttpOnly || sess.SameSite != http.SameSiteStrictMode || sess.Path != "/" {
		t.Errorf("session cookie over TLS: %d %+v", resp.StatusCode, sess)
	}

	// Plain HTTP behind a TLS proxy.
	req := httptest.NewRequest(http.MethodGet, "http://console.example/console/signin", nil)
	req.Header.Set("X-Forwarded-Proto", "https")
	w := httptest.NewRecorder()
	con.Mount(fake, nil).ServeHTTP(w, req)
	if c := cookieOf(w.Result(), "__Host-"+signinCookie); c == nil || !c.Secure {
		t.Errorf("behind a TLS proxy the sign-in cookie is %+v", c)
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			return sb.String()
		}
	}
}

func cookieOf(resp *http.Response, name string) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Failed sign-ins from one address are throttled, the operator token
// included while it lasts, and the allowance comes back with time.
func TestSigninThrottle(t *testing.T) {
	tc := startConsole(t, consoleOptions{})
	b := tc.browser()
	for i := range signinBurst {
		if r := b.submitSignin(b.signinForm(), "not-the-token-at-all-"); r.status != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d", i+1, r.status)
		}
	}
	r := b.submitSignin(b.signinForm(), testToken)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" || cookie(r, sessionCookie) != nil {
		t.Fatalf("sign-in after %d failures: %d, Retry-After %q", signinBurst, r.status, r.header.Get("Retry-After"))
	}
	tc.clock.advance(signinRefill)
	if r := b.submitSignin(b.signinForm(), testToken); r.status != http.StatusSeeOther {
		t.Errorf("sign-in once the allowance came back: %d", r.status)
	}
}

// A session ends when idle too long, at its fixed age however busy, and
// at sign-out; an ended session's cookie opens nothing.
func TestSessionExpiry(t *testing.T) {
	tc := startConsole(t, consoleOptions{})

	idle := tc.browser()
	idle.signIn()
	tc.clock.advance(DefaultSessionIdle - time.Minute)
	if r := idle.do(http.MethodGet, "/console/api/keys", "", "", nil); r.status != http.StatusOK {
		t.Fatalf("a session used within its idle time: %d", r.status)
	}
	tc.clock.advance(DefaultSessionIdle)
	if r := idle.do(http.MethodGet, "/console/api/keys", "", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("a session idle for %s: %d", DefaultSessionIdle, r.status)
	}

	busy := tc.browser()
	busy.signIn()
	for elapsed := time.Duration(0); elapsed < DefaultSessionMax-DefaultSessionIdle; elapsed += DefaultSessionIdle / 2 {
		tc.clock.advance(DefaultSessionIdle / 2)
		if r := busy.do(http.MethodGet, "/console/api/keys", "", "", nil); r.status != http.StatusOK {
			t.Fatalf("a busy session after %s: %d", elapsed, r.status)
		}
	}
	tc.clock.advance(DefaultSessionIdle)
	if r := busy.do(http.MethodGet, "/console/api/keys", "", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("a busy session past %s: %d", DefaultSessionMax, r.status)
	}

	out := tc.browser()
	out.signIn()
	if r := out.do(http.MethodPost, "/console/api/signout", "application/json", "{}", nil); r.status != http.StatusForbidden {
		t.Errorf("sign-out without the CSRF token: %d", r.status)
	}
	if r := out.post("/console/api/signout", "{}"); r.status != http.StatusOK {
		t.Fatalf("sign-out: %d %s", r.status, r.body)
	}
	if r := out.do(http.MethodGet, "/console/api/keys", "", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("after sign-out: %d", r.status)
	}
}
