package authserver

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
)

// A consent link someone else started shows nothing to approve: the page
// and its post need the cookie of the browser that began the request. And
// no endpoint hands out the code for a request id (op's callback is not
// mounted): the code only goes back in the consent's own answer.
func TestConsentNeedsTheBrowserThatStarted(t *testing.T) {
	e := newEnv(t, "", nil)
	client := e.register(loopbackRedirect)
	_, challenge := pkce()
	id := e.authorize(e.authQuery(client, loopbackRedirect, challenge)) // the "attacker" started it
	csrf, _ := e.consentPage(id)

	jar, _ := cookiejar.New(nil)
	victim := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := victim.Get(e.issuer + pathConsent + "?id=" + url.QueryEscape(id))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("another browser's consent page: %d, want 403", resp.StatusCode)
	}
	form := url.Values{"id": {id}, "csrf": {csrf}, "api_key": {e.secret}, "action": {"allow"}}
	req, _ := http.NewRequest(http.MethodPost, e.issuer+pathConsent, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", e.issuer)
	resp, err = victim.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Location") != "" {
		t.Fatalf("another browser's consent post: %d to %q, want 403 and no redirect", resp.StatusCode, resp.Header.Get("Location"))
	}

	// The browser that started it consents; a third party asking op's
	// callback for the id gets nothing.
	back := e.clientRedirect(e.postConsent(id, csrf, e.secret, "allow", e.sameOrigin()))
	if back.Query().Get("code") == "" {
		t.Fatalf("consent did not send the code back: %s", back)
	}
	for _, path := range []string{"/oauth/authorize/callback?id=" + url.QueryEscape(id)} {
		resp, err := http.Get(e.issuer + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404 (not mounted)", path, resp.StatusCode)
		}
	}
}

// Anyone may start an authorization request, and each is kept until it
// expires: a challenge that is not S256's, an oversized state, and more
// requests than the bound are refused.
func TestAuthorizationRequestsAreBounded(t *testing.T) {
	e := newEnv(t, "", nil)
	client := e.register(loopbackRedirect)
	_, challenge := pkce()
	refused := func(what string, q url.Values, code string) {
		t.Helper()
		resp, body := e.get(e.issuer + pathAuthorize + "?" + q.Encode())
		loc := resp.Header.Get("Location")
		if strings.HasPrefix(loc, e.issuer+pathConsent) || (!strings.Contains(loc, "error="+code) && !strings.Contains(body, code)) {
			t.Errorf("%s: %d to %q: want %s", what, resp.StatusCode, loc, code)
		}
	}
	q := e.authQuery(client, loopbackRedirect, challenge)
	q.Set("state", strings.Repeat("s", maxStateLen+1))
	refused("an oversized state", q, "invalid_request")
	q = e.authQuery(client, loopbackRedirect, "short")
	refused("a challenge that is no S256", q, "invalid_request")

	old := maxPendingRequests
	maxPendingRequests = 2
	t.Cleanup(func() { maxPendingRequests = old })
	e.authorize(e.authQuery(client, loopbackRedirect, challenge))
	e.authorize(e.authQuery(client, loopbackRedirect, challenge))
	refused("a request past the bound", e.authQuery(client, loopbackRedirect, challenge), "temporarily_unavailable")
}

// The token endpoint reads its request from the body only: a code or a
// refresh token in a URL ends up in logs.
func TestTokenRequestNotInTheQuery(t *testing.T) {
	e := newEnv(t, "", nil)
	resp, body := e.postForm(e.issuer+pathToken+"?refresh_token=rt&grant_type=refresh_token", url.Values{"grant_type": {"refresh_token"}}, nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `"invalid_request"`) {
		t.Fatalf("a token request in the query: %d %s", resp.StatusCode, body)
	}
}
