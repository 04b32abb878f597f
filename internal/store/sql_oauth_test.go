package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The OAuth records: the bound on clients, codes and refresh tokens good
// once (a reused refresh token ends its family), expired rows gone, and
// one signing key however many front ends offer theirs.
func TestOAuthRecords(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, other := b.open(t), b.open(t)
		now := time.Now()

		if err := s.AddOAuthClient(ctx, OAuthClient{ID: "c1", Metadata: `{"a":1}`, Created: now}, 2); err != nil {
			t.Fatal(err)
		}
		if err := s.AddOAuthClient(ctx, OAuthClient{ID: "c2", Metadata: `{}`, Created: now}, 2); err != nil {
			t.Fatal(err)
		}
		if err := s.AddOAuthClient(ctx, OAuthClient{ID: "c3", Metadata: `{}`, Created: now}, 2); !errors.Is(err, ErrOAuthFull) {
			t.Errorf("third client of at most 2: %v", err)
		}
		if c, err := other.OAuthClient(ctx, "c1"); err != nil || c.Metadata != `{"a":1}` {
			t.Errorf("client: %+v, %v", c, err)
		}
		if _, err := s.OAuthClient(ctx, "nosuch"); !errors.Is(err, ErrOAuthNotFound) {
			t.Errorf("unknown client: %v", err)
		}

		// A code is good once, on whichever front end; its replay is told
		// apart from an unknown code.
		if err := s.PutOAuthAuthRequest(ctx, OAuthAuthRequest{ID: "r1", Data: "d1", Expires: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutOAuthAuthRequest(ctx, OAuthAuthRequest{ID: "r1", Data: "d2", Expires: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetOAuthCode(ctx, "r1", "h1"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetOAuthCode(ctx, "r1", "h2"); !errors.Is(err, ErrOAuthNotFound) {
			t.Errorf("a second code for one request: %v", err)
		}
		if r, err := other.TakeOAuthCode(ctx, "h1"); err != nil || r.Data != "d2" {
			t.Errorf("take code: %+v, %v", r, err)
		}
		if err := s.DeleteOAuthAuthRequest(ctx, "r1"); err != nil {
			t.Fatal(err)
		}
		if r, err := s.TakeOAuthCode(ctx, "h1"); !errors.Is(err, ErrOAuthUsed) || r.ID != "r1" {
			t.Errorf("replayed code: %+v, %v", r, err)
		}
		if _, err := s.TakeOAuthCode(ctx, "nosuch"); !errors.Is(err, ErrOAuthNotFound) {
			t.Errorf("unknown code: %v", err)
		}
		// An expired request is gone, and swept by the next write.
		if err := s.PutOAuthAuthRequest(ctx, OAuthAuthRequest{ID: "old", Data: "d", Expires: now.Add(-time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.OAuthAuthRequest(ctx, "old"); !errors.Is(err, ErrOAuthNotFound) {
			t.Errorf("expired request: %v", err)
		}
		if err := s.PutOAuthAuthRequest(ctx, OAuthAuthRequest{ID: "r2", Data: "d", Expires: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := s.db.queryRow(ctx, `SELECT COUNT(*) FROM oauth_auth_requests WHERE id = 'old'`).Scan(&n); err != nil || n != 0 {
			t.Errorf("expired request not swept: %d, %v", n, err)
		}

		// Refresh tokens: rotation, then reuse of the old one ends the family.
		add := func(hash, family string) {
			t.Helper()
			if err := s.AddOAuthRefresh(ctx, OAuthRefresh{Hash: hash, Family: family, KeyID: "k", ClientID: "c1", Data: "x", Expires: now.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
		}
		add("t1", "f1")
		add("u1", "f2")
		if r, err := other.TakeOAuthRefresh(ctx, "t1"); err != nil || r.Family != "f1" || r.KeyID != "k" {
			t.Errorf("take refresh: %+v, %v", r, err)
		}
		add("t2", "f1")
		if _, err := s.TakeOAuthRefresh(ctx, "t1"); !errors.Is(err, ErrOAuthUsed) {
			t.Errorf("reused refresh token: %v", err)
		}
		if _, err := s.OAuthRefresh(ctx, "t2"); !errors.Is(err, ErrOAuthNotFound) {
			t.Errorf("the family's live token survived a reuse: %v", err)
		}
		if _, err := s.OAuthRefresh(ctx, "u1"); err != nil {
			t.Errorf("another family's token: %v", err)
		}
		if err := s.RevokeOAuthGrant(ctx, "f2"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.TakeOAuthRefresh(ctx, "u1"); !errors.Is(err, ErrOAuthNotFound) {
			t.Errorf("revoked grant's token: %v", err)
		}

		first, err := s.OAuthSigningKey(ctx, OAuthSigningKey{ID: "kid1", Algorithm: "ES256", PrivatePEM: "pem1", Created: now})
		if err != nil || first.ID != "kid1" {
			t.Fatalf("first signing key: %+v, %v", first, err)
		}
		if k, err := other.OAuthSigningKey(ctx, OAuthSigningKey{ID: "kid2", Algorithm: "ES256", PrivatePEM: "pem2", Created: now}); err != nil || k.ID != "kid1" || k.PrivatePEM != "pem1" {
			t.Errorf("second front end's signing key: %+v, %v", k, err)
		}
	})
}
