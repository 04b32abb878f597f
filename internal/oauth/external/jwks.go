package external

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// keySet is the authorization server's signing keys (its jwks_uri),
// fetched once and again when a token names a key it does not have (the
// server rotated its keys), or when the copy is older than maxAge (a key
// the server withdrew stops being trusted). Refetches are at most one per
// minInterval, so tokens with made-up key ids cannot make the verifier
// hammer the server. A failed refetch keeps the last good copy: an
// authorization server that is briefly down does not stop every client.
type keySet struct {
	url         string
	client      *http.Client
	minInterval time.Duration
	maxAge      time.Duration
	now         func() time.Time

	mu      sync.Mutex
	keys    []jose.JSONWebKey
	fetched time.Time // zero before the first successful fetch
	tried   time.Time // the last fetch, successful or not
	fetches int       // for tests: how many times the set was fetched
}

func newKeySet(c *http.Client, url string, now func() time.Time) *keySet {
	return &keySet{url: url, client: c, minInterval: 10 * time.Second, maxAge: 15 * time.Minute, now: now}
}

// errUnknownKey is a token naming no key of the set, even after a refetch.
type errUnknownKey struct{ kid string }

func (e errUnknownKey) Error() string {
	return fmt.Sprintf("signed by key %q, which the issuer does not publish", e.kid)
}

// candidates are the signing keys a token with this key id (kid) and alg
// may be signed with: the one with that id, or, with no id, every key.
func (s *keySet) candidates(ctx context.Context, kid string, alg string) ([]jose.JSONWebKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	stale := s.fetched.IsZero() || now.Sub(s.fetched) > s.maxAge
	keys := s.match(kid, alg)
	if (stale || len(keys) == 0) && now.Sub(s.tried) >= s.minInterval {
		if err := s.fetch(ctx); err != nil && s.fetched.IsZero() {
			return nil, err
		}
		keys = s.match(kid, alg)
	}
	if len(keys) == 0 {
		return nil, errUnknownKey{kid}
	}
	return keys, nil
}

func (s *keySet) match(kid, alg string) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, k := range s.keys {
		if (kid == "" || k.KeyID == kid) && (k.Algorithm == "" || k.Algorithm == alg) {
			out = append(out, k)
		}
	}
	return out
}

// fetch replaces the keys with the server's current set (the public
// signing keys in it).
func (s *keySet) fetch(ctx context.Context) error {
	s.tried = s.now()
	s.fetches++
	var set jose.JSONWebKeySet
	if _, err := getJSON(ctx, s.client, s.url, &set); err != nil {
		return fmt.Errorf("fetch the issuer's keys (jwks_uri %s): %w", s.url, err)
	}
	var keys []jose.JSONWebKey
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" || !k.Valid() || !k.IsPublic() {
			continue
		}
		keys = append(keys, k)
	}
	s.keys, s.fetched = keys, s.now()
	return nil
}
