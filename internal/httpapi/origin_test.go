package httpapi

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A server without keys on loopback runs code for whoever reaches it, and a
// web page the operator visits reaches loopback too. Requests such a page
// can make are refused on every route: a Host that is not a loopback name
// (DNS rebinding), a foreign Origin, a cross-site fetch, and a body not
// declared JSON (which a page can POST without a preflight). Before, a
// rebinding page with text/plain got a 200 and the program's output.
func TestCrossSiteRequestsAreRefused(t *testing.T) {
	ts := startServer(t, serverOptions{mcp: true, fake: scripted()}) // no keys: open, on 127.0.0.1
	port := ts.URL[strings.LastIndexByte(ts.URL, ':')+1:]
	body := `{"runtime": "bash", "code": "echo ran"}`
	refused := []struct {
		name, method, path string
		header             map[string]string
		status             int
		code               string
	}{
		{"rebinding host", "POST", "/v1/exec", map[string]string{"Host": "rebind.evil.example:" + port}, 403, CodeForbidden},
		{"foreign origin", "POST", "/v1/exec", map[string]string{"Origin": "http://evil.example"}, 403, CodeForbidden},
		{"the issue's request", "POST", "/v1/exec", map[string]string{"Host": "rebind.evil.example", "Origin": "http://evil.example", "Content-Type": "text/plain"}, 403, CodeForbidden},
		{"loopback origin on another port", "POST", "/v1/exec", map[string]string{"Origin": "http://127.0.0.1:1"}, 403, CodeForbidden},
		{"null origin", "POST", "/v1/exec", map[string]string{"Origin": "null"}, 403, CodeForbidden},
		{"cross-site fetch", "GET", "/v1/runtimes", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, CodeForbidden},
		{"text/plain body", "POST", "/v1/exec", map[string]string{"Content-Type": "text/plain"}, 415, CodeMediaType},
		{"form body", "POST", "/v1/exec", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, CodeMediaType},
		{"no content type", "POST", "/v1/exec", map[string]string{"Content-Type": ""}, 415, CodeMediaType},
		{"rebinding host, runtimes", "GET", "/v1/runtimes", map[string]string{"Host": "rebind.evil.example"}, 403, CodeForbidden},
		{"rebinding host, healthz", "GET", "/healthz", map[string]string{"Host": "rebind.evil.example"}, 403, CodeForbidden},
		{"rebinding host, metrics", "GET", "/metrics", map[string]string{"Host": "rebind.evil.example"}, 403, CodeForbidden},
		{"foreign origin, mcp", "POST", "/mcp", map[string]string{"Origin": "http://evil.example"}, 403, CodeForbidden},
	}
	for _, c := range refused {
		a := ts.request(t, c.method, c.path, body, c.header)
		if a.status != c.status || a.errorBody(t).Code != c.code || !a.closed {
			t.Errorf("%s: %d %s (closed %v), want %d %s and a close", c.name, a.status, a.body, a.closed, c.status, c.code)
		}
		if strings.Contains(string(a.body), "ran") {
			t.Errorf("%s: the code ran", c.name)
		}
	}
	if n := len(ts.fake.Ran()); n != 0 {
		t.Errorf("%d refused requests reached the engine", n)
	}

	for _, c := range []struct {
		name   string
		header map[string]string
	}{
		{"no origin", nil},
		{"localhost", map[string]string{"Host": "localhost:" + port}},
		{"same origin", map[string]string{"Origin": ts.URL}},
		{"same origin by name", map[string]string{"Host": "localhost:" + port, "Origin": "http://localhost:" + port}},
		{"same-origin fetch", map[string]string{"Origin": ts.URL, "Sec-Fetch-Site": "same-origin"}},
		{"json with charset", map[string]string{"Content-Type": "application/json; charset=utf-8"}},
	} {
		if a := ts.request(t, "POST", "/v1/exec", body, c.header); a.status != http.StatusOK || !strings.Contains(string(a.body), "ran") {
			t.Errorf("%s: %d %s", c.name, a.status, a.body)
		}
	}
}

// request sends one request with headers set as given (Host too; an empty
// value removes a header the helper would set).
func (ts *testServer) request(t *testing.T, method, path, body string, header map[string]string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		switch {
		case k == "Host":
			req.Host = v
		case v == "":
			req.Header.Del(k)
		default:
			req.Header.Set(k, v)
		}
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: data, closed: resp.Close}
}

// Bound beyond loopback (a keyed server behind a real name or a proxy),
// Host is not checked, so the names clients use keep working; Origin still
// must be the server's own. On loopback, the operator's own --addr name is
// accepted besides loopback names.
func TestGuardOriginBeyondLoopback(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	public := GuardOrigin(ok, &net.TCPAddr{IP: net.IPv4zero, Port: 8722}, ":8722")
	loopback := GuardOrigin(ok, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8722}, "devbox:8722")
	for _, c := range []struct {
		guard        http.Handler
		host, origin string
		want         int
	}{
		{public, "scratchrun.example.com", "", 204},
		{public, "scratchrun.example.com", "https://scratchrun.example.com", 204},
		{public, "scratchrun.example.com:8722", "http://scratchrun.example.com:8722", 204},
		{public, "10.0.0.5:8722", "", 204},
		{public, "scratchrun.example.com", "https://evil.example", 403},
		{public, "scratchrun.example.com", "https://scratchrun.example.com:444", 403},
		{loopback, "devbox:8722", "", 204},
		{loopback, "127.0.0.1:8722", "", 204},
		{loopback, "[::1]:8722", "", 204},
		{loopback, "app.localhost:8722", "", 204},
		{loopback, "otherbox:8722", "", 403},
	} {
		r := httptest.NewRequest(http.MethodGet, "/v1/runtimes", nil)
		r.Host = c.host
		if c.origin != "" {
			r.Header.Set("Origin", c.origin)
		}
		w := httptest.NewRecorder()
		c.guard.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("Host %q Origin %q: %d, want %d", c.host, c.origin, w.Code, c.want)
		}
	}
}

// /metrics is behind the keys like the API once keys exist (it answered
// anyone); the metrics listener of their own (--metrics-addr) serves them
// without one, and /healthz and /readyz stay open as documented.
func TestMetricsNeedAKey(t *testing.T) {
	ts := startServer(t, serverOptions{fake: scripted()})
	_, key := ts.key("alice", 100, 4)
	if a := ts.request(t, "GET", "/metrics", "", nil); a.status != http.StatusUnauthorized {
		t.Errorf("/metrics without a key: %d", a.status)
	}
	if a := ts.request(t, "GET", "/metrics", "", map[string]string{"Authorization": "Bearer " + key}); a.status != http.StatusOK ||
		!strings.Contains(string(a.body), "scratchrun_sandboxes_in_use") {
		t.Errorf("/metrics with a key: %d", a.status)
	}
	if resp, err := httpClient.Get(ts.metricsURL + "/metrics"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("the keyless metrics listener: %v", err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), "scratchrun_sandboxes_in_use") {
			t.Errorf("the keyless metrics listener serves no scratchrun_sandboxes_in_use")
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if a := ts.request(t, "GET", path, "", nil); a.status != http.StatusOK {
			t.Errorf("%s without a key: %d", path, a.status)
		}
	}
}
