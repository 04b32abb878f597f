package authserver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// docServer serves client ID metadata documents over TLS on loopback:
// /good.json is valid (cached a minute), /liar.json names another
// client_id, /nameless.json has no client_name, /moved.json redirects.
type docServer struct {
	*httptest.Server
	fetches atomic.Int32
}

func newDocServer(t *testing.T) *docServer {
	ds := &docServer{}
	ds.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ds.fetches.Add(1)
		self := ds.URL + r.URL.Path
		doc := map[string]any{"client_id": self, "client_name": "Doc client", "redirect_uris": []string{loopbackRedirect},
			"grant_types": []string{"authorization_code", "refresh_token"}, "token_endpoint_auth_method": "none"}
		switch r.URL.Path {
		case "/good.json":
			w.Header().Set("Cache-Control", "max-age=60")
		case "/liar.json":
			doc["client_id"] = ds.URL + "/good.json"
		case "/nameless.json":
			delete(doc, "client_name")
		case "/moved.json":
			http.Redirect(w, r, "/good.json", http.StatusFound)
			return
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(doc)
	}))
	t.Cleanup(ds.Close)
	return ds
}

// A client ID metadata document is fetched, checked and cached, and its
// client goes through the whole flow; a document that lies about its URL,
// lacks a name, or moved is refused on a page.
func TestMetadataDocumentClient(t *testing.T) {
	ds := newDocServer(t)
	hc := ds.Client()
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	e := newEnv(t, "", func(c *Config) { c.MetadataClient = hc })
	clientID := ds.URL + "/good.json"
	verifier, challenge := pkce()

	id := e.authorize(e.authQuery(clientID, loopbackRedirect, challenge))
	if _, page := e.consentPage(id); !strings.Contains(page, "Doc client") || !strings.Contains(page, "127.0.0.1:5173") {
		t.Errorf("the consent page does not name the document's client:\n%s", page)
	}
	status, tok := e.exchange(clientID, loopbackRedirect, e.code(clientID, loopbackRedirect, challenge), verifier)
	if status != http.StatusOK || str(tok["refresh_token"]) == "" {
		t.Fatalf("token: %d %v", status, tok)
	}
	if g, err := e.srv.Verifier().Verify(context.Background(), str(tok["access_token"])); err != nil || g.ClientID != clientID || g.KeyID != e.key.ID {
		t.Errorf("verify: %+v, %v", g, err)
	}
	if n := ds.fetches.Load(); n != 1 {
		t.Errorf("the document was fetched %d times within its max-age", n)
	}

	for _, c := range []struct{ path, why string }{
		{"/liar.json", "client_id is not its URL"},
		{"/nameless.json", "no client_name"},
		{"/moved.json", errUnfetchable},
		{"/missing.json", errUnfetchable},
	} {
		resp, body := e.get(e.issuer + pathAuthorize + "?" + e.authQuery(ds.URL+c.path, loopbackRedirect, challenge).Encode())
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" || !strings.Contains(body, "invalid_client") || !strings.Contains(body, c.why) {
			t.Errorf("%s: %d to %q: %s", c.path, resp.StatusCode, resp.Header.Get("Location"), body)
		}
	}
}

// The default client never reaches this machine or its network, whatever
// the URL's host resolves to.
func TestGuardedClientRefusesInwardAddresses(t *testing.T) {
	ds := newDocServer(t)
	dc := newDocumentCache(guardedClient())
	for _, u := range []string{ds.URL + "/good.json", strings.Replace(ds.URL, "127.0.0.1", "localhost", 1) + "/good.json"} {
		_, err := dc.get(context.Background(), u)
		var doc *errMetadataDocument
		if !errors.As(err, &doc) || !strings.Contains(err.Error(), errForbiddenAddress.Error()) {
			t.Errorf("%s: %v", u, err)
		}
	}
	if n := ds.fetches.Load(); n != 0 {
		t.Errorf("the guarded client reached the loopback server %d times", n)
	}
	for addr, public := range map[string]bool{
		"127.0.0.1": false, "10.1.2.3": false, "192.168.0.1": false, "172.16.0.1": false, "169.254.169.254": false,
		"100.64.0.1": false, "0.0.0.0": false, "::1": false, "fe80::1": false, "fd00::1": false, "::ffff:127.0.0.1": false,
		"224.0.0.1": false, "93.184.216.34": true, "2606:4700::1111": true,
		"64:ff9b::a00:1": false, "2002:a00:1::1": false,
	} {
		if got := publicAddr(netip.MustParseAddr(addr)); got != public {
			t.Errorf("publicAddr(%s) = %v", addr, got)
		}
	}
}

func TestIsMetadataURL(t *testing.T) {
	for id, want := range map[string]bool{
		"https://app.example/client.json": true, "https://app.example/": false, "https://app.example": false,
		"http://app.example/client.json": false, "src_abc": false, "https://u@app.example/c": false,
		"https://app.example/c#f": false, "https://app.example/a/../c": false,
	} {
		if got := isMetadataURL(id); got != want {
			t.Errorf("isMetadataURL(%q) = %v", id, got)
		}
	}
}

func TestCacheTTL(t *testing.T) {
	for cc, want := range map[string]time.Duration{
		"": docDefaultTTL, "max-age=60": time.Minute, "public, max-age=999999": docMaxTTL,
		"no-store": 0, "max-age=60, no-cache": 0, "max-age=x": docDefaultTTL,
	} {
		if got := cacheTTL(cc); got != want {
			t.Errorf("cacheTTL(%q) = %v, want %v", cc, got, want)
		}
	}
}

// A document that cannot be fetched is remembered as such for a while: a
// client ID naming it does not make the server fetch on every request.
func TestFailedFetchIsRemembered(t *testing.T) {
	ds := newDocServer(t)
	dc := newDocumentCache(ds.Client())
	for range 3 {
		if _, err := dc.get(context.Background(), ds.URL+"/missing.json"); err == nil || !strings.Contains(err.Error(), errUnfetchable) {
			t.Fatalf("a missing document: %v", err)
		}
	}
	if n := ds.fetches.Load(); n != 1 {
		t.Errorf("fetched %d times, want once", n)
	}
}
