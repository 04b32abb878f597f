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

// What anyone on the network can make the store keep stays bounded:
// clients nobody signed in with are swept after OAuthClientIdle (so a
// filled registration empties again), pending requests are counted, and a
// family keeps only its last few used refresh tokens.
func TestOAuthRecordsStayBounded(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t)
		long := time.Now().Add(-OAuthClientIdle - time.Hour)
		for _, id := range []string{"idle", "signed-in"} {
			if err := s.AddOAuthClient(ctx, OAuthClient{ID: id, Metadata: `{}`, Created: long}, 2); err != nil {
				t.Fatal(err)
			}
		}
		now := time.Now()
		if err := s.AddOAuthRefresh(ctx, OAuthRefresh{Hash: "h0", Family: "f", KeyID: "k", ClientID: "signed-in", Data: "{}", Expires: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddOAuthClient(ctx, OAuthClient{ID: "new", Metadata: `{}`, Created: now}, 2); err != nil {
			t.Fatalf("a full registration with an idle client in it: %v", err)
		}
		if _, err := s.OAuthClient(ctx, "idle"); !errors.Is(err, ErrOAuthNotFound) {
			t.Errorf("the idle client is still there: %v", err)
		}
		if _, err := s.OAuthClient(ctx, "signed-in"); err != nil {
			t.Errorf("the client with a grant was swept: %v", err)
		}

		for i, exp := range []time.Duration{time.Hour, 2 * time.Hour} {
			if err := s.PutOAuthAuthRequest(ctx, OAuthAuthRequest{ID: string(rune('a' + i)), Data: "d", Expires: now.Add(exp)}); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := s.CountOAuthAuthRequests(ctx); err != nil || n != 2 {
			t.Errorf("pending requests: %d, %v; want 2", n, err)
		}

		// Rotate ten times: the family keeps its current token and its
		// last used ones only.
		prev := "h0"
		for i := 1; i <= 10; i++ {
			if _, err := s.TakeOAuthRefresh(ctx, prev); err != nil {
				t.Fatal(err)
			}
			next := "h" + string(rune('0'+i))
			if err := s.AddOAuthRefresh(ctx, OAuthRefresh{Hash: next, Family: "f", KeyID: "k", ClientID: "signed-in", Data: "{}",
				Expires: now.Add(time.Hour + time.Duration(i)*time.Minute)}); err != nil {
				t.Fatal(err)
			}
			prev = next
		}
		var rows int
		if err := s.db.queryRow(ctx, `SELECT COUNT(*) FROM oauth_refresh_tokens WHERE family = ?`, "f").Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows > usedRefreshKept+1 {
			t.Errorf("the family holds %d tokens after ten rotations, want at most %d", rows, usedRefreshKept+1)
		}
		if _, err := s.TakeOAuthRefresh(ctx, "h9"); !errors.Is(err, ErrOAuthUsed) {
			t.Errorf("a recent used token's replay: %v, want ErrOAuthUsed", err)
		}
	})
}
