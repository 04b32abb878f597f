package external

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/oauth"
)

// An introspecting verifier: the server's answer decides, token_use
// keeps a refresh token from passing as an access token, and an
// authorization server that cannot answer is this server's trouble, not
// a refusal of the token.
func TestIntrospection(t *testing.T) {
	as := newFakeAS(t)
	exp := time.Now().Add(time.Minute).Unix()
	answers := map[string]map[string]any{
		"tk-good-9f3e":    {"active": true, "sub": "alice", "client_id": "app", "aud": resource, "iss": as.srv.URL, "exp": exp, "scope": "scratchrun"},
		"tk-refresh-9f3e": {"active": true, "sub": "alice", "aud": []string{resource}, "exp": exp, "scope": "scratchrun", "token_use": "refresh_token"},
		"tk-other-9f3e":   {"active": true, "sub": "alice", "aud": resource, "iss": "https://evil.example", "exp": exp, "scope": "scratchrun"},
		"tk-gone-9f3e":    {"active": false},
	}
	var user, pass string
	as.srv.Config.Handler.(*http.ServeMux).HandleFunc("POST /introspect", func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ = r.BasicAuth()
		if r.PostFormValue("token") == "tk-down-9f3e" {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		a, ok := answers[r.PostFormValue("token")]
		if !ok {
			a = answers["tk-gone-9f3e"]
		}
		json.NewEncoder(w).Encode(a)
	})
	rules, _ := ParseRules("sub:alice=ci-key")
	v, err := New(context.Background(), Config{Issuer: as.srv.URL, Resource: resource, Scope: "scratchrun", Rules: rules,
		Keys: testStore(t, "ci-key"), ClientID: "rs:1", ClientSecret: "s&cret", IntrospectionURL: as.srv.URL + "/introspect"})
	if err != nil {
		t.Fatal(err)
	}
	if g, err := v.Verify(context.Background(), "tk-good-9f3e"); err != nil || g.Subject != "alice" || g.ClientID != "app" {
		t.Fatalf("good: %+v, %v", g, err)
	}
	if user != "rs%3A1" || pass != "s%26cret" {
		t.Errorf("basic auth = %q:%q; want the form-encoded credentials (RFC 6749 §2.3.1)", user, pass)
	}
	for tok, why := range map[string]string{"tk-refresh-9f3e": "refresh_token, not an access token", "tk-other-9f3e": "another issuer", "tk-gone-9f3e": "not active"} {
		_, err := v.Verify(context.Background(), tok)
		refused(t, tok, tok, err, why)
	}
	_, err = v.Verify(context.Background(), "tk-down-9f3e")
	if err == nil || errors.Is(err, oauth.ErrInvalidToken) {
		t.Errorf("the server answering 503: Verify = %v; want an error that is not a refusal of the token", err)
	}
}
