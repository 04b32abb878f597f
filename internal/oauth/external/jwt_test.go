package external

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/scratchrun/scratchrun/internal/oauth"
	"github.com/scratchrun/scratchrun/internal/store"
)

// fakeAS is an authorization server's metadata and key set, served by an
// httptest server, with keys the test makes and can rotate.
type fakeAS struct {
	srv *httptest.Server
	mu  sync.Mutex
	pub []jose.JSONWebKey
}

func newFakeAS(t *testing.T) *fakeAS {
	as := &fakeAS{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"issuer": as.srv.URL, "jwks_uri": as.srv.URL + "/jwks"})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		as.mu.Lock()
		defer as.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: as.pub})
	})
	as.srv = httptest.NewServer(mux)
	t.Cleanup(as.srv.Close)
	return as
}

// signer is a private key whose public half the server may publish.
type signer struct {
	kid string
	alg jose.SignatureAlgorithm
	key any
}

func newSigner(t *testing.T, kid string) signer {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signer{kid: kid, alg: jose.ES256, key: k}
}

// publish makes the server's key set exactly these signers' public keys.
func (as *fakeAS) publish(signers ...signer) {
	as.mu.Lock()
	defer as.mu.Unlock()
	as.pub = nil
	for _, s := range signers {
		var pub any
		switch k := s.key.(type) {
		case *ecdsa.PrivateKey:
			pub = &k.PublicKey
		case *rsa.PrivateKey:
			pub = &k.PublicKey
		}
		as.pub = append(as.pub, jose.JSONWebKey{Key: pub, KeyID: s.kid, Algorithm: string(s.alg), Use: "sig"})
	}
}

func (s signer) sign(t *testing.T, claims map[string]any) string {
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: s.alg, Key: jose.JSONWebKey{Key: s.key, KeyID: s.kid}},
		(&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(sig).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

const resource = "https://scratchrun.example/mcp"

// claims are a good token's claims from as, for alice, for resource.
func (as *fakeAS) claims() map[string]any {
	now := time.Now()
	return map[string]any{
		"iss": as.srv.URL, "sub": "alice", "client_id": "mcp-app", "aud": []string{resource},
		"exp": now.Add(5 * time.Minute).Unix(), "iat": now.Unix(), "nbf": now.Unix(), "scope": "openid scratchrun",
	}
}

// testStore is a real key store in t's temporary directory with the keys
// named, each active.
func testStore(t *testing.T, names ...string) *store.Store {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "keys.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, n := range names {
		if _, _, err := st.CreateKey(context.Background(), store.NewKey{Name: n, RatePerMin: 60, Concurrency: 2}); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func newJWTVerifier(t *testing.T, as *fakeAS, st *store.Store, rules string) *Verifier {
	r, err := ParseRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	v, err := New(context.Background(), Config{Issuer: as.srv.URL, Resource: resource, Scope: "scratchrun", Rules: r, Keys: st, ClockSkew: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// refused checks that err is a refusal of the token saying why, without
// quoting it.
func refused(t *testing.T, name string, token string, err error, why string) {
	t.Helper()
	if !errors.Is(err, oauth.ErrInvalidToken) {
		t.Errorf("%s: Verify = %v; want an error wrapping ErrInvalidToken", name, err)
		return
	}
	if !strings.Contains(err.Error(), why) {
		t.Errorf("%s: Verify = %q; want it to say %q", name, err, why)
	}
	parts := strings.Split(token, ".")
	if strings.Contains(err.Error(), token) || len(parts[len(parts)-1]) > 8 && strings.Contains(err.Error(), parts[len(parts)-1]) {
		t.Errorf("%s: the error quotes the token: %q", name, err)
	}
}

func TestJWTGoodTokenMapsToKey(t *testing.T) {
	as := newFakeAS(t)
	k1 := newSigner(t, "k1")
	as.publish(k1)
	st := testStore(t, "ci-key", "team")
	v := newJWTVerifier(t, as, st, "sub:alice=ci-key,client:mcp-app=team")
	g, err := v.Verify(context.Background(), k1.sign(t, as.claims()))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := st.ActiveKey(context.Background(), "ci-key")
	if g.KeyID != want.ID || g.Subject != "alice" || g.ClientID != "mcp-app" || g.Expiry.IsZero() {
		t.Fatalf("grant = %+v; want key %s, subject alice, client mcp-app and an expiry", g, want.ID)
	}
	// Hydra's scp list counts as much as a scope string.
	c := as.claims()
	delete(c, "scope")
	c["scp"] = []string{"scratchrun"}
	if _, err := v.Verify(context.Background(), k1.sign(t, c)); err != nil {
		t.Fatalf("a token with scp [scratchrun]: %v", err)
	}
}

func TestJWTRefusals(t *testing.T) {
	as := newFakeAS(t)
	k1 := newSigner(t, "k1")
	as.publish(k1)
	st := testStore(t, "ci-key", "revoked-key")
	v := newJWTVerifier(t, as, st, "sub:alice=ci-key,sub:mallory=revoked-key")
	if _, err := st.Revoke(context.Background(), "revoked-key"); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	with := func(k string, val any) map[string]any {
		c := as.claims()
		if val == nil {
			delete(c, k)
		} else {
			c[k] = val
		}
		return c
	}
	forged := newSigner(t, "k1") // same kid, another key
	for _, tc := range []struct {
		name   string
		token  string
		reason string
	}{
		{"wrong audience", k1.sign(t, with("aud", []string{"https://other.example/mcp"})), "not for this resource"},
		{"no audience", k1.sign(t, with("aud", nil)), "not for this resource"},
		{"expired", k1.sign(t, with("exp", now.Add(-time.Minute).Unix())), "expired"},
		{"no expiry", k1.sign(t, with("exp", nil)), "no expiry"},
		{"nbf in the future", k1.sign(t, with("nbf", now.Add(time.Minute).Unix())), "not valid yet"},
		{"wrong issuer", k1.sign(t, with("iss", "https://evil.example")), "another issuer"},
		{"missing scope", k1.sign(t, with("scope", "openid")), "lacks the scope scratchrun"},
		{"unmapped subject", k1.sign(t, with("sub", "bob")), "no ScratchRun key for this token's subject"},
		{"revoked key", k1.sign(t, with("sub", "mallory")), "revoked"},
		{"forged signature", forged.sign(t, as.claims()), "signature does not verify"},
		{"not a JWT", "opaque-token-value", "not a JWT"},
	} {
		_, err := v.Verify(context.Background(), tc.token)
		refused(t, tc.name, tc.token, err, tc.reason)
	}
}

// A token signed with no algorithm, or with HMAC keyed by the public key
// (the classic confusion), is refused before any key is tried.
func TestJWTAlgNoneAndHMACRefused(t *testing.T) {
	as := newFakeAS(t)
	k1 := newSigner(t, "k1")
	as.publish(k1)
	v := newJWTVerifier(t, as, testStore(t, "ci-key"), "sub:alice=ci-key")
	payload, _ := json.Marshal(as.claims())
	b64 := base64.RawURLEncoding.EncodeToString
	none := b64([]byte(`{"alg":"none","kid":"k1"}`)) + "." + b64(payload) + "."
	_, err := v.Verify(context.Background(), none)
	refused(t, "alg none", none, err, "not a JWT signed with an asymmetric algorithm")

	hs, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: jose.JSONWebKey{Key: []byte("0123456789abcdef0123456789abcdef"), KeyID: "k1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hmac, err := jwt.Signed(hs).Claims(as.claims()).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	_, err = v.Verify(context.Background(), hmac)
	refused(t, "HS256", hmac, err, "not a JWT signed with an asymmetric algorithm")
}

// A token signed by a key the server has not published yet is refused;
// once the server publishes it (a rotation), the next token with that kid
// makes the verifier refetch the set and is accepted. Refetches are
// bounded: within minInterval an unknown kid does not fetch again.
func TestJWTUnknownKidThenRotation(t *testing.T) {
	as := newFakeAS(t)
	k1, k2 := newSigner(t, "k1"), newSigner(t, "k2")
	as.publish(k1)
	v := newJWTVerifier(t, as, testStore(t, "ci-key"), "sub:alice=ci-key")
	tok2 := k2.sign(t, as.claims())

	v.keys.minInterval = time.Hour
	fetches := v.keys.fetches
	for range 3 {
		_, err := v.Verify(context.Background(), tok2)
		refused(t, "unknown kid", tok2, err, `key "k2", which the issuer does not publish`)
	}
	if v.keys.fetches != fetches {
		t.Fatalf("unknown kids fetched the key set %d more times within minInterval; want none", v.keys.fetches-fetches)
	}

	as.publish(k1, k2) // rotation: k2 added
	v.keys.minInterval = 0
	if _, err := v.Verify(context.Background(), tok2); err != nil {
		t.Fatalf("after the rotation: %v", err)
	}
	as.publish(k2) // k1 withdrawn: its tokens fail once the copy is refetched
	v.keys.maxAge = 0
	tok1 := k1.sign(t, as.claims())
	_, err := v.Verify(context.Background(), tok1)
	refused(t, "withdrawn key", tok1, err, `key "k1", which the issuer does not publish`)
}

func TestNewErrorsNameTheField(t *testing.T) {
	as := newFakeAS(t)
	as.publish(newSigner(t, "k1"))
	st := testStore(t, "ci-key")
	rules, _ := ParseRules("sub:alice=ci-key")
	good := Config{Issuer: as.srv.URL, Resource: resource, Rules: rules, Keys: st}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no issuer", func(c *Config) { c.Issuer = "" }, "Issuer is required"},
		{"issuer not a URL", func(c *Config) { c.Issuer = "as.example" }, "Issuer"},
		{"issuer mismatch", func(c *Config) { c.Issuer = as.srv.URL + "/" }, "names issuer"},
		{"no resource", func(c *Config) { c.Resource = "" }, "Resource is required"},
		{"relative resource", func(c *Config) { c.Resource = "/mcp" }, "Resource"},
		{"no rules", func(c *Config) { c.Rules = nil }, "Rules"},
		{"rule names no key", func(c *Config) { c.Rules = []Rule{{"sub", "bob", "nokey"}} }, `Rules: sub:bob names key "nokey"`},
		{"no key store", func(c *Config) { c.Keys = nil }, "Keys"},
		{"secret without id", func(c *Config) { c.ClientSecret = "s" }, "need ClientID"},
		{"introspection not published", func(c *Config) { c.ClientID = "rs" }, "IntrospectionURL"},
	} {
		cfg := good
		tc.edit(&cfg)
		if _, err := New(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v; want an error saying %q", tc.name, err, tc.want)
		}
	}
	if _, err := New(context.Background(), good); err != nil {
		t.Fatalf("the good config: %v", err)
	}
}

func TestWellKnownURLs(t *testing.T) {
	got, _ := wellKnownURLs("https://as.example/tenant1")
	want := []string{
		"https://as.example/.well-known/oauth-authorization-server/tenant1",
		"https://as.example/.well-known/openid-configuration/tenant1",
		"https://as.example/tenant1/.well-known/openid-configuration",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("wellKnownURLs = %v, want %v", got, want)
	}
	got, _ = wellKnownURLs("https://as.example")
	if len(got) != 2 || got[1] != "https://as.example/.well-known/openid-configuration" {
		t.Fatalf("wellKnownURLs(no path) = %v", got)
	}
}
