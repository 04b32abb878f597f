package store

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A key's rate holds across handles (front ends): N/min admits N calls from
// any mix of handles, then refuses with the time until the next token; a
// refunded token can be spent again; each key has a bucket of its own.
func TestRateSharedAcrossHandles(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s1, s2 := b.open(t), b.open(t)
		k, _, _ := s1.CreateKey(ctx, NewKey{Name: "three", RatePerMin: 3, Concurrency: 10})
		other, _, _ := s1.CreateKey(ctx, NewKey{Name: "other", RatePerMin: 1, Concurrency: 1})
		var last Lease
		for i, s := range []*Store{s1, s2, s1} {
			lease, err := s.Admit(ctx, k.ID, time.Second)
			if err != nil {
				t.Fatalf("call %d within the rate: %v", i, err)
			}
			if lease.Key.ID != k.ID || lease.Key.RatePerMin != 3 {
				t.Errorf("lease of %+v", lease.Key)
			}
			last = lease
		}
		_, err := s2.Admit(ctx, k.ID, time.Second)
		var le *LimitError
		if !errors.As(err, &le) || le.Limit != LimitRate || le.Max != 3 || le.RetryAfter < 19*time.Second || le.RetryAfter > 20*time.Second {
			t.Fatalf("fourth call of a 3/min key: %v (want a rate refusal, about 20 s to the next token)", err)
		}
		if err := s1.Release(ctx, last, true); err != nil {
			t.Fatal(err)
		}
		if _, err := s2.Admit(ctx, k.ID, time.Second); err != nil {
			t.Errorf("the refunded token: %v", err)
		}
		if _, err := s2.Admit(ctx, other.ID, time.Second); err != nil {
			t.Errorf("another key: %v", err)
		}
	})
}

// A key with concurrency 2, hammered through three handles at once, never
// has more than 2 calls admitted, and every call gets in in the end. That
// 2 were admitted at once shows in the refusals (each says the limit of 2
// was reached), not in the calls' own overlap: under the race detector on
// a loaded machine the windows this test times can miss each other.
func TestConcurrencySharedAcrossHandles(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		handles := []*Store{b.open(t), b.open(t), b.open(t)}
		k, _, _ := handles[0].CreateKey(ctx, NewKey{Name: "two", RatePerMin: 1 << 20, Concurrency: 2})
		// Two at once through two handles, and not a third.
		first, err1 := handles[0].Admit(ctx, k.ID, time.Second)
		second, err2 := handles[1].Admit(ctx, k.ID, time.Second)
		_, err3 := handles[2].Admit(ctx, k.ID, time.Second)
		var le *LimitError
		if err1 != nil || err2 != nil || !errors.As(err3, &le) || le.Limit != LimitConcurrency {
			t.Fatalf("two calls then a third of a concurrency-2 key: %v, %v, %v", err1, err2, err3)
		}
		for _, l := range []Lease{first, second} {
			if err := handles[0].Release(ctx, l, false); err != nil {
				t.Fatal(err)
			}
		}
		var inFlight, most, refused atomic.Int64
		atOnce(t, 12, handles, func(_ int, s *Store) error {
			for range 4 {
				var lease Lease
				for {
					var err error
					lease, err = s.Admit(ctx, k.ID, 50*time.Millisecond)
					var le *LimitError
					if errors.As(err, &le) && le.Limit == LimitConcurrency && le.Max == 2 {
						refused.Add(1)
						time.Sleep(2 * time.Millisecond)
						continue
					}
					if err != nil {
						return err
					}
					break
				}
				n := inFlight.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(5 * time.Millisecond)
				inFlight.Add(-1)
				if err := s.Release(ctx, lease, false); err != nil {
					return err
				}
			}
			return nil
		})
		t.Logf("48 calls of a concurrency-2 key through 3 handles: at most %d at once, %d refusals", most.Load(), refused.Load())
		if most.Load() > 2 {
			t.Errorf("%d calls at once, want 2 at most", most.Load())
		}
		if refused.Load() == 0 {
			t.Error("no call was ever refused: the test did not contend")
		}
	})
}

// A concurrency refusal says when the key's earliest call is expected to
// end; a revoked key is refused by every handle at once and its slots go.
func TestConcurrencyRetryAfterAndRevoke(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s1, s2 := b.open(t), b.open(t)
		k, _, _ := s1.CreateKey(ctx, NewKey{Name: "one", RatePerMin: 100, Concurrency: 1})
		if _, err := s1.Admit(ctx, k.ID, 3*time.Second); err != nil {
			t.Fatal(err)
		}
		_, err := s2.Admit(ctx, k.ID, time.Second)
		var le *LimitError
		if !errors.As(err, &le) || le.Limit != LimitConcurrency || le.Max != 1 || le.RetryAfter <= 2*time.Second || le.RetryAfter > 3*time.Second {
			t.Fatalf("second call of a concurrency-1 key: %v (want about 3 s)", err)
		}
		if _, err := s2.Revoke(ctx, k.Name); err != nil {
			t.Fatal(err)
		}
		for i, s := range []*Store{s1, s2} {
			if _, err := s.Admit(ctx, k.ID, time.Second); !errors.Is(err, ErrNotFound) {
				t.Errorf("handle %d admits a revoked key: %v", i, err)
			}
		}
		if _, err := s1.Admit(ctx, "key_nosuch", time.Second); !errors.Is(err, ErrNotFound) {
			t.Errorf("an unknown key: %v", err)
		}
		var leases int
		if err := s1.db.queryRow(ctx, `SELECT COUNT(*) FROM leases WHERE key_id = ?`, k.ID).Scan(&leases); err != nil || leases != 0 {
			t.Errorf("%d leases of a revoked key, %v", leases, err)
		}
	})
}

// Limiter: no key, no limits; a permit not run refunds its token; releasing
// twice is harmless; refusals say at least a second.
func TestLimiter(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t)
		l := NewLimiter(s, nil)
		if p, err := l.Admit(ctx, "", time.Second); p != nil || err != nil {
			t.Fatalf("no key: %v, %v", p, err)
		}
		var none *Permit
		none.Release(true)
		k, _, _ := s.CreateKey(ctx, NewKey{Name: "one", RatePerMin: 1, Concurrency: 1})
		p, err := l.Admit(ctx, k.ID, time.Minute)
		if err != nil || p.Key().ID != k.ID {
			t.Fatalf("Admit = %v, %v", p, err)
		}
		_, err = l.Admit(ctx, k.ID, time.Minute)
		var le *LimitError
		if !errors.As(err, &le) || le.Limit != LimitRate {
			t.Fatalf("second call of a 1/min key: %v", err)
		}
		p.Release(false)
		p.Release(true) // the second release does nothing: no second refund
		p, err = l.Admit(ctx, k.ID, 10*time.Millisecond)
		if err != nil {
			t.Fatalf("after a refund: %v", err)
		}
		p.Release(true)
		if _, err := l.Admit(ctx, k.ID, time.Minute); !errors.As(err, &le) || le.Limit != LimitRate {
			t.Errorf("after a run, the token stays spent: %v", err)
		}
		many, _, _ := s.CreateKey(ctx, NewKey{Name: "many", RatePerMin: 1000, Concurrency: 1})
		held, _ := l.Admit(ctx, many.ID, 10*time.Millisecond)
		_, err = l.Admit(ctx, many.ID, 10*time.Millisecond)
		if !errors.As(err, &le) || le.Limit != LimitConcurrency || le.RetryAfter != time.Second {
			t.Errorf("a call expected to end at once: %v; want Retry-After 1 s", err)
		}
		held.Release(true)
	})
}

// A front end that dies (kill -9: nothing released) frees its key's slots
// within LeaseTTL; one that lives keeps them, however long its calls run,
// by renewing them.
func TestLeasesOfADeadFrontEndExpire(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t)
		k, _, _ := s.CreateKey(ctx, NewKey{Name: "two", RatePerMin: 1000, Concurrency: 2})
		holder := startLeaseHolder(t, b.dsn, k.ID, 2)
		refusedForConcurrency := func() bool {
			_, err := s.Admit(ctx, k.ID, time.Second)
			var le *LimitError
			if err == nil {
				return false
			}
			if !errors.As(err, &le) || le.Limit != LimitConcurrency {
				t.Fatalf("Admit: %v", err)
			}
			return true
		}
		if !refusedForConcurrency() {
			t.Fatal("a third call was admitted beside the holder's two")
		}
		time.Sleep(LeaseTTL + 2*RenewEvery)
		if !refusedForConcurrency() {
			t.Fatalf("the holder's slots expired while it lived (renewed every %s, lease %s)", RenewEvery, LeaseTTL)
		}
		if err := holder.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		holder.Wait()
		for refusedForConcurrency() {
			if time.Since(killed) > LeaseTTL+10*time.Second {
				t.Fatalf("the dead holder's slots are still taken %s after the kill", time.Since(killed).Round(time.Millisecond))
			}
			time.Sleep(50 * time.Millisecond)
		}
		freed := time.Since(killed)
		t.Logf("slots of a killed front end free %s after the kill (lease %s, renewed every %s)", freed.Round(time.Millisecond), LeaseTTL, RenewEvery)
		if freed > LeaseTTL+2*time.Second {
			t.Errorf("slots freed %s after the kill, want within the lease time %s (and a margin for load)", freed.Round(time.Millisecond), LeaseTTL)
		}
	})
}

// startLeaseHolder starts this test binary as a front end that admits n
// calls of keyID through a Limiter and holds them until killed.
func startLeaseHolder(t *testing.T, dsn, keyID string, n int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "STORE_TEST_HOLD_DSN="+dsn, "STORE_TEST_HOLD_KEY="+keyID, "STORE_TEST_HOLD_N="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "held\n" {
		t.Fatalf("lease holder: %q, %v", line, err)
	}
	return cmd
}

// runLeaseHolder is the lease holder's side of startLeaseHolder; it
// reports whether this process is one (it then never returns).
func runLeaseHolder() bool {
	dsn := os.Getenv("STORE_TEST_HOLD_DSN")
	if dsn == "" {
		return false
	}
	ctx := context.Background()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "lease holder:", err)
		os.Exit(1)
	}
	s, err := Open(ctx, dsn)
	if err != nil {
		fail(err)
	}
	l := NewLimiter(s, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	n, _ := strconv.Atoi(os.Getenv("STORE_TEST_HOLD_N"))
	for range n {
		if _, err := l.Admit(ctx, os.Getenv("STORE_TEST_HOLD_KEY"), time.Minute); err != nil {
			fail(err)
		}
	}
	fmt.Println("held")
	select {}
}

func rawSQLite(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func pgExecURL(url, sql string) error {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, sql)
	return err
}
