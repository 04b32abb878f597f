package oauthclient

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// get asks the callback server for path?query and returns the status and
// the page.
func get(t *testing.T, srv *httptest.Server, path string, q url.Values) (int, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if cc := resp.Header.Get("Cache-Control"); resp.StatusCode != http.StatusNotFound && cc != "no-store" {
		t.Errorf("Cache-Control %q: the page of a URL with a code must not be kept", cc)
	}
	return resp.StatusCode, string(body)
}

// delivered is what the callback handed on, if anything: ServeHTTP hands
// on before it answers, so after the answer there is nothing to wait for.
func delivered(cb *callback) (callbackResult, bool) {
	select {
	case r := <-cb.done:
		return r, true
	default:
		return callbackResult{}, false
	}
}

const (
	testState  = "state-of-this-sign-in"
	testIssuer = "https://as.example"
)

func TestCallbackDeliversCode(t *testing.T) {
	cb := newCallback(testState, testIssuer)
	srv := httptest.NewServer(cb)
	defer srv.Close()
	status, page := get(t, srv, callbackPath, url.Values{"code": {"c1"}, "state": {testState}, "iss": {testIssuer}})
	if status != http.StatusOK || !strings.Contains(page, "You can close this tab") {
		t.Errorf("page %d %q", status, page)
	}
	r, ok := delivered(cb)
	if !ok || r.err != nil || r.res.Code != "c1" || r.res.State != testState || r.res.Iss != testIssuer {
		t.Fatalf("delivered %+v (%v)", r, ok)
	}
	// A reload of the tab changes nothing.
	if status, page := get(t, srv, callbackPath, url.Values{"code": {"c2"}, "state": {testState}}); status != http.StatusOK || !strings.Contains(page, "already complete") {
		t.Errorf("reload: %d %q", status, page)
	}
	if r, ok := delivered(cb); ok {
		t.Errorf("a second redirect was handed on: %+v", r)
	}
}

// A redirect without this sign-in's state is not handed on (RFC 6749
// §10.12: it may be any page's forgery), and the sign-in goes on waiting.
func TestCallbackRefusesStateMismatch(t *testing.T) {
	cb := newCallback(testState, testIssuer)
	srv := httptest.NewServer(cb)
	defer srv.Close()
	for _, q := range []url.Values{
		{"code": {"c1"}, "state": {"another"}},
		{"code": {"c1"}},
		{"error": {"access_denied"}, "state": {"another"}},
	} {
		if status, page := get(t, srv, callbackPath, q); status != http.StatusBadRequest || !strings.Contains(page, "does not match") {
			t.Errorf("%v: %d %q", q, status, page)
		}
		if r, ok := delivered(cb); ok {
			t.Errorf("%v was handed on: %+v", q, r)
		}
	}
	// The genuine one still gets through.
	get(t, srv, callbackPath, url.Values{"code": {"c1"}, "state": {testState}})
	if r, ok := delivered(cb); !ok || r.err != nil || r.res.Code != "c1" {
		t.Errorf("after the forgeries: %+v (%v)", r, ok)
	}
}

// The server's refusal ends the sign-in with its error, and the tab says so.
func TestCallbackAccessDenied(t *testing.T) {
	cb := newCallback(testState, testIssuer)
	srv := httptest.NewServer(cb)
	defer srv.Close()
	status, page := get(t, srv, callbackPath, url.Values{"error": {"access_denied"}, "error_description": {"the user said no"}, "state": {testState}})
	if status != http.StatusOK || !strings.Contains(page, "access_denied: the user said no") {
		t.Errorf("page %d %q", status, page)
	}
	r, ok := delivered(cb)
	if !ok || r.res != nil || r.err == nil || !strings.Contains(r.err.Error(), "access_denied") {
		t.Errorf("delivered %+v (%v); want the access_denied error", r, ok)
	}
}

// A response from another issuer than the one this sign-in went to is a
// mix-up (RFC 9207): refused, the sign-in ends with an error.
func TestCallbackRefusesIssuerMismatch(t *testing.T) {
	cb := newCallback(testState, testIssuer)
	srv := httptest.NewServer(cb)
	defer srv.Close()
	status, page := get(t, srv, callbackPath, url.Values{"code": {"c1"}, "state": {testState}, "iss": {"https://evil.example"}})
	if status != http.StatusBadRequest || !strings.Contains(page, "another authorization server") {
		t.Errorf("page %d %q", status, page)
	}
	r, ok := delivered(cb)
	if !ok || r.res != nil || r.err == nil || !strings.Contains(r.err.Error(), "evil.example") {
		t.Errorf("delivered %+v (%v); want the mix-up error", r, ok)
	}
}

func TestCallbackOtherPaths(t *testing.T) {
	cb := newCallback(testState, testIssuer)
	srv := httptest.NewServer(cb)
	defer srv.Close()
	if status, _ := get(t, srv, "/favicon.ico", nil); status != http.StatusNotFound {
		t.Errorf("/favicon.ico: %d", status)
	}
	resp, err := http.Post(srv.URL+callbackPath+"?code=c&state="+testState, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
	if r, ok := delivered(cb); ok {
		t.Errorf("handed on %+v", r)
	}
}
