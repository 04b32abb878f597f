package oauthclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/oauth2"
)

// tokenEndpoint answers every refresh with status and body.
func tokenEndpoint(t *testing.T, status int, body string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func handlerWithGrant(t *testing.T, tokenURL string) (*Handler, FileStore, *savingSource) {
	store := FileStore{Dir: t.TempDir()}
	g := Grant{Issuer: "https://as.example", Resource: "https://mcp.example/mcp", ClientID: "c",
		TokenURL: tokenURL, AuthStyle: oauth2.AuthStyleInParams, RefreshToken: "r1"}
	if err := store.Save(&g); err != nil {
		t.Fatal(err)
	}
	h := &Handler{cfg: Config{Endpoint: g.Resource, Store: store, Stderr: io.Discard}.withDefaults()}
	h.current = h.newSource(g, nil)
	return h, store, h.current
}

// A token endpoint that refuses the grant for any reason (invalid_grant,
// or invalid_client for a registration it forgot) ends it: the grant is
// forgotten, and the error reads invalid_grant, which the transport
// answers by sending the request without a token, so that the 401 starts
// a sign-in.
func TestRefusedGrantIsForgotten(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
	}{
		{http.StatusBadRequest, `{"error":"invalid_grant","error_description":"revoked"}`},
		{http.StatusUnauthorized, `{"error":"invalid_client"}`},
	} {
		srv := tokenEndpoint(t, c.status, c.body)
		h, store, src := handlerWithGrant(t, srv.URL)
		_, err := src.Token()
		var re *oauth2.RetrieveError
		if !errors.As(err, &re) || re.ErrorCode != "invalid_grant" {
			t.Errorf("%d %s: Token error %v; want an invalid_grant RetrieveError", c.status, c.body, err)
		}
		if _, err := store.Load("https://as.example", "https://mcp.example/mcp"); !errors.Is(err, ErrNoGrant) {
			t.Errorf("%d: the refused grant is still stored (%v)", c.status, err)
		}
		if ts, _ := h.TokenSource(context.Background()); ts != nil {
			t.Errorf("%d: the handler still offers the refused grant's source", c.status)
		}
	}
}

// A token endpoint that is down says nothing of the grant: it is kept for
// the next try, and the error is the server's.
func TestGrantSurvivesServerError(t *testing.T) {
	srv := tokenEndpoint(t, http.StatusServiceUnavailable, `{"error":"temporarily_unavailable"}`)
	h, store, src := handlerWithGrant(t, srv.URL)
	_, err := src.Token()
	var re *oauth2.RetrieveError
	if err == nil || (errors.As(err, &re) && re.ErrorCode == "invalid_grant") {
		t.Errorf("Token error %v; want the 503 as it is", err)
	}
	if g, err := store.Load("https://as.example", "https://mcp.example/mcp"); err != nil || g.RefreshToken != "r1" {
		t.Errorf("the grant after a 503: %+v, %v", g, err)
	}
	if ts, _ := h.TokenSource(context.Background()); ts == nil {
		t.Error("the handler dropped the grant after a 503")
	}
}

// A forced refresh happens once per refused token: when the server
// refuses the refreshed one too, the next step is a sign-in, not another
// refresh.
func TestForcedRefreshOncePerToken(t *testing.T) {
	srv := tokenEndpoint(t, http.StatusOK, `{"access_token":"a2","token_type":"Bearer","expires_in":3600,"refresh_token":"r2"}`)
	_, store, src := handlerWithGrant(t, srv.URL)
	if !src.refresh("a1") {
		t.Fatal("the first forced refresh did not happen")
	}
	if g, _ := store.Load("https://as.example", "https://mcp.example/mcp"); g == nil || g.RefreshToken != "r2" {
		t.Errorf("rotated refresh token not stored: %+v", g)
	}
	if src.refresh("a2") {
		t.Error("refreshed again for the token the last forced refresh gave")
	}
	if src.refresh("") {
		t.Error("refreshed for a request that carried no token")
	}
}

// The sign-in gives up after SignInTimeout when no redirect comes (a tab
// closed, a browser that never opened), and says so.
func TestSignInTimesOut(t *testing.T) {
	var opened []string
	h := &Handler{cfg: Config{Endpoint: "https://mcp.example/mcp", SignInTimeout: 20 * time.Millisecond, Stderr: io.Discard,
		OpenBrowser: func(u string) error { opened = append(opened, u); return nil }}.withDefaults()}
	ln, redirect, err := listenCallback(0)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = h.fetcher(ln, testIssuer)(context.Background(), &auth.AuthorizationArgs{URL: "https://as.example/authorize?state=s1&redirect_uri=" + redirect})
	if err == nil || !strings.Contains(err.Error(), "no sign-in within") {
		t.Errorf("fetcher: %v; want the timeout", err)
	}
	if len(opened) != 1 {
		t.Errorf("browser opened %d times", len(opened))
	}
}
