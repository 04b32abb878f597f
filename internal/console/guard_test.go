package console

import (
	"bytes"
	"context"
	"io/fs"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// A state-changing request needs its session's CSRF token in the header,
// and a JSON body: without either nothing changes.
func TestCSRFRequired(t *testing.T) {
	tc := startConsole(t, consoleOptions{})
	b := tc.browser()
	b.signIn()
	other := tc.browser()
	other.signIn()
	body := `{"name":"ci","rate_per_min":10,"concurrency":1}`
	// A token one character off (whatever the real one starts with).
	wrong := "x" + b.csrf[1:]
	if b.csrf[0] == 'x' {
		wrong = "y" + b.csrf[1:]
	}

	cases := []struct {
		name        string
		contentType string
		header      map[string]string
		status      int
	}{
		{"no token", "application/json", nil, http.StatusForbidden},
		{"wrong token", "application/json", map[string]string{csrfHeader: wrong}, http.StatusForbidden},
		{"another session's token", "application/json", map[string]string{csrfHeader: other.csrf}, http.StatusForbidden},
		{"a form", "application/x-www-form-urlencoded", map[string]string{csrfHeader: b.csrf}, http.StatusUnsupportedMediaType},
		{"text/plain", "text/plain", map[string]string{csrfHeader: b.csrf}, http.StatusUnsupportedMediaType},
	}
	for _, c := range cases {
		r := b.do(http.MethodPost, "/console/api/keys", c.contentType, body, c.header)
		if r.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, r.status, r.body, c.status)
		}
		if c.status == http.StatusForbidden && errorOf(t, r).Code != codeCSRF {
			t.Errorf("%s: code %q", c.name, errorOf(t, r).Code)
		}
	}
	// The same holds on every state-changing route.
	for _, path := range []string{"/console/api/keys/key_x/revoke", "/console/api/keys/key_x/limits", "/console/api/run", "/console/api/signout"} {
		if r := b.do(http.MethodPost, path, "application/json", `{}`, nil); r.status != http.StatusForbidden {
			t.Errorf("POST %s without a CSRF token: %d", path, r.status)
		}
	}
	if keys, _ := tc.keys.ListKeys(context.Background()); len(keys) != 0 {
		t.Fatalf("refused requests created keys: %+v", keys)
	}
	if r := b.post("/console/api/keys", body); r.status != http.StatusCreated {
		t.Errorf("with the token: %d %s", r.status, r.body)
	}
}

// Requests a page of another site makes are refused before the console
// sees them (GuardOrigin, on every route), whatever they carry.
func TestCrossSiteRefused(t *testing.T) {
	tc := startConsole(t, consoleOptions{})
	b := tc.browser()
	b.signIn()
	for name, h := range map[string]map[string]string{
		"foreign Origin":      {"Origin": "http://evil.example", csrfHeader: b.csrf},
		"null Origin":         {"Origin": "null", csrfHeader: b.csrf},
		"cross-site fetch":    {"Sec-Fetch-Site": "cross-site", csrfHeader: b.csrf},
		"rebinding Host name": {"Host": "evil.example", csrfHeader: b.csrf},
	} {
		req, _ := http.NewRequest(http.MethodPost, tc.URL+"/console/api/keys", strings.NewReader(`{"name":"evil"}`))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		if h["Host"] != "" {
			req.Host = h["Host"]
		}
		resp, err := b.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d", name, resp.StatusCode)
		}
	}
	// A cross-site form post of the sign-in form too.
	r := b.do(http.MethodPost, "/console/signin", "application/x-www-form-urlencoded", "token="+testToken,
		map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"})
	if r.status != http.StatusForbidden {
		t.Errorf("cross-site sign-in form: %d", r.status)
	}
	if keys, _ := tc.keys.ListKeys(context.Background()); len(keys) != 0 {
		t.Errorf("cross-site requests created keys: %+v", keys)
	}
}

// Every answer carries the security headers: a policy that allows no
// inline script or style and no framing, nosniff, and no referrer sent to
// other sites.
func TestSecurityHeaders(t *testing.T) {
	tc := startConsole(t, consoleOptions{})
	b := tc.browser()
	check := func(what string, r reply) {
		t.Helper()
		csp := r.header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "object-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %q", what, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s: CSP %q allows inline code", what, csp)
		}
		for h, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin"} {
			if got := r.header.Get(h); got != want {
				t.Errorf("%s: %s = %q, want %q", what, h, got, want)
			}
		}
	}
	check("sign-in page", b.do(http.MethodGet, "/console/signin", "", "", nil))
	check("refused API call", b.do(http.MethodGet, "/console/api/keys", "", "", nil))
	check("stylesheet", b.do(http.MethodGet, "/console/assets/console.css", "", "", nil))
	b.signIn()
	check("console", b.do(http.MethodGet, "/console/", "", "", nil))
	check("API", b.do(http.MethodGet, "/console/api/keys", "", "", nil))
	if r := b.do(http.MethodGet, "/console/api/keys", "", "", nil); r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("API answer Cache-Control %q", r.header.Get("Cache-Control"))
	}
}

// The pages hold no inline script, style or event handler (the policy
// would block them, and it must never need loosening), and the scripts
// never write HTML from strings.
func TestNoInlineCode(t *testing.T) {
	scripts := regexp.MustCompile(`(?s)<script([^>]*)>(.*?)</script>`)
	inline := []*regexp.Regexp{
		regexp.MustCompile(`<style`),
		regexp.MustCompile(`\sstyle=`),
		regexp.MustCompile(`\son[a-z]+=`),
		regexp.MustCompile(`javascript:`),
	}
	fs.WalkDir(pages, "pages", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, _ := pages.ReadFile(path)
		for _, m := range scripts.FindAllSubmatch(data, -1) {
			if !bytes.Contains(m[1], []byte("src=")) || len(bytes.TrimSpace(m[2])) > 0 {
				t.Errorf("%s has an inline script: %q", path, m[0])
			}
		}
		for _, re := range inline {
			if loc := re.FindIndex(data); loc != nil {
				t.Errorf("%s has inline code: %q", path, data[loc[0]:min(loc[1]+20, len(data))])
			}
		}
		return nil
	})
	unsafe := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function|setAttribute\("on`)
	fs.WalkDir(assets, "assets", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".js") {
			return err
		}
		data, _ := assets.ReadFile(path)
		if loc := unsafe.FindIndex(data); loc != nil {
			t.Errorf("%s writes HTML or code from strings: %q", path, data[loc[0]:loc[1]])
		}
		return nil
	})
}

// Assets are served by name only: no listings, nothing outside them.
func TestAssets(t *testing.T) {
	tc := startConsole(t, consoleOptions{})
	b := tc.browser()
	for path, want := range map[string]string{
		"/console/assets/console.css": "text/css",
		"/console/assets/js/app.js":   "text/javascript",
	} {
		r := b.do(http.MethodGet, path, "", "", nil)
		if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), want) {
			t.Errorf("GET %s: %d %q", path, r.status, r.header.Get("Content-Type"))
		}
	}
	for _, path := range []string{"/console/assets/", "/console/assets/js/", "/console/assets/nope.js", "/console/pages/signin.html", "/console/assets/../pages/signin.html"} {
		r := b.do(http.MethodGet, path, "", "", nil)
		if r.status == http.StatusTemporaryRedirect || r.status == http.StatusMovedPermanently {
			// The mux cleans "..": follow it once.
			r = b.do(http.MethodGet, r.header.Get("Location"), "", "", nil)
		}
		if r.status != http.StatusNotFound {
			t.Errorf("GET %s: %d %s", path, r.status, r.body)
		}
	}
}
