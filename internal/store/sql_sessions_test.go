package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// Session rows: inserted open, read back by id hash, listed open by owner
// or all, touched, ended once (the first reason stays), the operator's end
// request by a unique hash prefix (read by the holding server only), a
// server's restart ending its own local rows only, and tombstones purged
// after their day; across two handles (two processes).
func TestCodeSessionRows(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, other := b.open(t), b.open(t)
		base := time.UnixMilli(time.Now().UnixMilli())
		row := func(id, owner, server, worker string, created time.Duration) CodeSession {
			return CodeSession{IDHash: HashSessionID(id), Owner: owner, Server: server, Worker: worker,
				Runtime: "python3.13", Created: base.Add(created), Expires: base.Add(created + 10*time.Minute)}
		}
		rows := []CodeSession{
			row("ses_a", "key_1", "srv1", "", 0),
			row("ses_b", "key_2", "srv1", "", time.Second),
			row("ses_c", "key_1", "srv2", "", 2*time.Second),
			row("ses_d", "key_1", "srv1", "w1", 3*time.Second),
		}
		for _, r := range rows {
			if err := s.InsertCodeSession(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.InsertCodeSession(ctx, rows[0]); err == nil {
			t.Error("a second row of one id was inserted")
		}
		got, err := other.CodeSession(ctx, rows[0].IDHash)
		if err != nil || got != rows[0] || !got.Open() {
			t.Fatalf("CodeSession = %+v, %v; want %+v", got, err, rows[0])
		}
		if _, err := other.CodeSession(ctx, HashSessionID("ses_none")); !errors.Is(err, ErrCodeSessionNotFound) {
			t.Errorf("unknown id hash: %v", err)
		}
		hashes := func(cs []CodeSession) string {
			var out []string
			for _, c := range cs {
				for i, r := range rows {
					if r.IDHash == c.IDHash {
						out = append(out, string(rune('a'+i)))
					}
				}
			}
			return strings.Join(out, "")
		}
		if all, err := other.OpenCodeSessions(ctx, "", true); err != nil || hashes(all) != "abcd" {
			t.Errorf("all open: %s, %v", hashes(all), err)
		}
		if mine, err := other.OpenCodeSessions(ctx, "key_1", false); err != nil || hashes(mine) != "acd" {
			t.Errorf("key_1's open: %s, %v", hashes(mine), err)
		}

		// Touch moves the expiry of an open row.
		later := base.Add(time.Hour)
		if err := s.TouchCodeSession(ctx, rows[0].IDHash, later); err != nil {
			t.Fatal(err)
		}
		if got, _ := other.CodeSession(ctx, rows[0].IDHash); !got.Expires.Equal(later) {
			t.Errorf("expiry after touch: %s, want %s", got.Expires, later)
		}

		// The operator's request, by prefix; only srv1 sees it as its own.
		if _, err := other.RequestCodeSessionEnd(ctx, rows[1].IDHash[:4]); err == nil {
			t.Error("a 4-digit prefix was taken")
		}
		if _, err := other.RequestCodeSessionEnd(ctx, "zzzzzzzzzz"); err == nil {
			t.Error("a prefix of non-hex digits was taken")
		}
		if _, err := other.RequestCodeSessionEnd(ctx, strings.Repeat("0", 64)); !errors.Is(err, ErrCodeSessionNotFound) {
			t.Errorf("no session of that hash: %v", err)
		}
		req, err := other.RequestCodeSessionEnd(ctx, strings.ToUpper(rows[1].IDHash[:MinSessionHashPrefix]))
		if err != nil || req.IDHash != rows[1].IDHash || !req.EndRequested {
			t.Fatalf("RequestCodeSessionEnd = %+v, %v", req, err)
		}
		if pend, err := s.EndRequestedCodeSessions(ctx, "srv1"); err != nil || hashes(pend) != "b" {
			t.Errorf("srv1's end requests: %s, %v", hashes(pend), err)
		}
		if pend, err := s.EndRequestedCodeSessions(ctx, "srv2"); err != nil || len(pend) != 0 {
			t.Errorf("srv2's end requests: %s, %v", hashes(pend), err)
		}

		// Ended once; the first reason stays; an ended row is no longer
		// open, nor asked to end.
		endAt := base.Add(time.Minute)
		if ok, err := s.EndCodeSession(ctx, rows[1].IDHash, "operator", endAt); !ok || err != nil {
			t.Fatalf("EndCodeSession = %v, %v", ok, err)
		}
		if ok, err := other.EndCodeSession(ctx, rows[1].IDHash, "deleted", endAt.Add(time.Second)); ok || err != nil {
			t.Errorf("second EndCodeSession = %v, %v", ok, err)
		}
		if got, _ := other.CodeSession(ctx, rows[1].IDHash); got.Open() || got.EndReason != "operator" || !got.Ended.Equal(endAt) {
			t.Errorf("ended row: %+v", got)
		}
		if pend, _ := s.EndRequestedCodeSessions(ctx, "srv1"); len(pend) != 0 {
			t.Errorf("an ended row is still asked to end: %s", hashes(pend))
		}
		if _, err := other.RequestCodeSessionEnd(ctx, rows[1].IDHash); !errors.Is(err, ErrCodeSessionNotFound) {
			t.Errorf("end request of an ended session: %v", err)
		}

		// A restart of srv1 ends its local rows only: not srv2's, not
		// those a worker holds.
		if n, err := other.EndServerCodeSessions(ctx, "srv1", "", "server_restart", endAt); err != nil || n != 1 {
			t.Errorf("EndServerCodeSessions = %d, %v; want 1", n, err)
		}
		if got, _ := s.CodeSession(ctx, rows[0].IDHash); got.EndReason != "server_restart" {
			t.Errorf("srv1's row after its restart: %+v", got)
		}
		if all, _ := s.OpenCodeSessions(ctx, "", true); hashes(all) != "cd" {
			t.Errorf("open after srv1's restart: %s", hashes(all))
		}

		// Tombstones go after their day; open rows stay.
		if n, err := s.PurgeCodeSessions(ctx, endAt); err != nil || n != 0 {
			t.Errorf("purge before the ends = %d, %v", n, err)
		}
		if n, err := s.PurgeCodeSessions(ctx, endAt.Add(24*time.Hour)); err != nil || n != 2 {
			t.Errorf("purge after a day = %d, %v; want 2", n, err)
		}
		if _, err := s.CodeSession(ctx, rows[0].IDHash); !errors.Is(err, ErrCodeSessionNotFound) {
			t.Errorf("purged tombstone: %v", err)
		}
		if all, _ := s.OpenCodeSessions(ctx, "", true); hashes(all) != "cd" {
			t.Errorf("open after purge: %s", hashes(all))
		}
	})
}

// Two open sessions whose id hashes share a prefix are not ended by it.
func TestCodeSessionEndPrefixAmbiguous(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t)
		now := time.Now()
		for _, h := range []string{"abcdef0011", "abcdef0022"} {
			if err := s.InsertCodeSession(ctx, CodeSession{IDHash: h, Server: "srv", Runtime: "bash", Created: now, Expires: now}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.RequestCodeSessionEnd(ctx, "abcdef00"); err == nil || !strings.Contains(err.Error(), "2 open sessions") {
			t.Errorf("ambiguous prefix: %v", err)
		}
		if c, err := s.RequestCodeSessionEnd(ctx, "abcdef002"); err != nil || c.IDHash != "abcdef0022" {
			t.Errorf("unique prefix: %+v, %v", c, err)
		}
	})
}
