package namespaces

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// fakeZygote stands in for a zygote in the pool's logic tests.
type fakeZygote struct {
	key     string
	n       int
	mu      sync.Mutex
	retired bool
	dead    bool
}

func (f *fakeZygote) Retire() { f.mu.Lock(); f.retired = true; f.mu.Unlock() }
func (f *fakeZygote) Dead() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dead
}

type fakeZygotes struct {
	mu      sync.Mutex
	started []*fakeZygote
	retired chan *fakeZygote
	fail    error
	gate    chan struct{} // when not nil, a start waits on it
}

func newFakePool(t *testing.T) (*zygotePool[*fakeZygote], *fakeZygotes) {
	f := &fakeZygotes{retired: make(chan *fakeZygote, 100)}
	p := newZygotePool(func(zc sandbox.Zygote, img sandbox.Image) (*fakeZygote, error) {
		if f.gate != nil {
			<-f.gate
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.fail != nil {
			return nil, f.fail
		}
		z := &fakeZygote{key: zc.Caller + "/" + zc.Runtime + "/" + zc.Variant, n: len(f.started)}
		f.started = append(f.started, z)
		return z, nil
	}, func(z *fakeZygote) { z.Retire(); f.retired <- z }, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { p.close(); p.wait() })
	return p, f
}

func getZygote(t *testing.T, p *zygotePool[*fakeZygote], caller, variant string) *fakeZygote {
	t.Helper()
	z, done, err := p.get(context.Background(), sandbox.Zygote{Caller: caller, Runtime: "python3.13", Variant: variant}, sandbox.Image{RootFS: "/img"})
	if err != nil {
		t.Fatal(err)
	}
	done()
	return z
}

func retiredWithin(t *testing.T, f *fakeZygotes) *fakeZygote {
	t.Helper()
	select {
	case z := <-f.retired:
		return z
	case <-time.After(30 * time.Second):
		t.Fatal("no zygote was retired")
		return nil
	}
}

// One zygote per caller, runtime and variant: two callers never get one
// zygote, one caller's calls of one variant always do (until it retires).
func TestZygotePoolKeysByCaller(t *testing.T) {
	p, _ := newFakePool(t)
	a1, a2 := getZygote(t, p, "alice", "light"), getZygote(t, p, "alice", "light")
	b1, ah := getZygote(t, p, "bob", "light"), getZygote(t, p, "alice", "heavy")
	if a1 != a2 {
		t.Errorf("one caller's calls got two zygotes")
	}
	if a1 == b1 || a1 == ah || b1 == ah {
		t.Errorf("distinct keys share a zygote: %s %s %s", a1.key, b1.key, ah.key)
	}
}

// After zygoteForks sandboxes a zygote is retired and a new one started;
// one in use is retired only once its sandbox is made.
func TestZygotePoolRetiresAfterForks(t *testing.T) {
	p, f := newFakePool(t)
	p.forks = 3
	first := getZygote(t, p, "alice", "light")
	getZygote(t, p, "alice", "light")
	z, done, err := p.get(context.Background(), sandbox.Zygote{Caller: "alice", Runtime: "python3.13", Variant: "light"}, sandbox.Image{RootFS: "/img"})
	if err != nil || z != first {
		t.Fatalf("third sandbox: %v %v", z, err)
	}
	if next := getZygote(t, p, "alice", "light"); next == first {
		t.Fatal("a fourth sandbox from a zygote limited to three")
	}
	select {
	case <-f.retired:
		t.Fatal("retired while a sandbox was being made through it")
	default:
	}
	done()
	if got := retiredWithin(t, f); got != first {
		t.Errorf("retired %v, want the first", got.key)
	}
}

// At most max zygotes live: the least recently used is retired first
// (once it has not been used for keep).
func TestZygotePoolRetiresLeastRecentlyUsed(t *testing.T) {
	p, f := newFakePool(t)
	p.max, p.keep = 2, 0
	a := getZygote(t, p, "a", "light")
	getZygote(t, p, "b", "light")
	time.Sleep(time.Millisecond) // lastUse must order them
	getZygote(t, p, "a", "light")
	getZygote(t, p, "c", "light")
	if got := retiredWithin(t, f); got.key != "b/python3.13/light" {
		t.Errorf("retired %s, want b's", got.key)
	}
	if getZygote(t, p, "a", "light") != a || p.liveCount() != 2 {
		t.Errorf("a's zygote was not kept, or more than 2 live (%d)", p.liveCount())
	}
}

// With every place held by a zygote used within keep, another key gets
// none (its sandboxes go to the helper) and no zygote is retired: more
// callers than places, calling in turn, would otherwise start a zygote
// per call.
func TestZygotePoolKeepsRecentlyUsedWhenFull(t *testing.T) {
	p, f := newFakePool(t)
	p.max, p.keep = 2, time.Hour
	a, b := getZygote(t, p, "a", "light"), getZygote(t, p, "b", "light")
	for range 3 {
		if _, _, err := p.get(context.Background(), sandbox.Zygote{Caller: "c", Runtime: "python3.13", Variant: "light"}, sandbox.Image{RootFS: "/img"}); !errors.Is(err, errZygotesBusy) {
			t.Fatalf("a third caller with two places held: %v, want errZygotesBusy", err)
		}
	}
	select {
	case z := <-f.retired:
		t.Errorf("%s's zygote was retired", z.key)
	default:
	}
	if getZygote(t, p, "a", "light") != a || getZygote(t, p, "b", "light") != b || len(f.started) != 2 {
		t.Errorf("a's and b's zygotes not kept, or another started (%d started)", len(f.started))
	}
}

// An idle zygote is retired; a dead one is replaced.
func TestZygotePoolRetiresIdleAndDead(t *testing.T) {
	p, f := newFakePool(t)
	p.idle = 10 * time.Millisecond
	z := getZygote(t, p, "a", "light")
	if got := retiredWithin(t, f); got != z || p.liveCount() != 0 {
		t.Errorf("idle: retired %v, %d live", got, p.liveCount())
	}
	p.mu.Lock() // expire reads it
	p.idle = time.Hour
	p.mu.Unlock()
	z = getZygote(t, p, "a", "light")
	z.mu.Lock()
	z.dead = true
	z.mu.Unlock()
	if getZygote(t, p, "a", "light") == z {
		t.Error("a dead zygote served again")
	}
}

// A zygote that failed to start is not tried again for zygoteRetry: its
// sandboxes go to the helper (get fails at once).
func TestZygotePoolRemembersAFailedStart(t *testing.T) {
	p, f := newFakePool(t)
	f.fail = errors.New("no interpreter")
	zc := sandbox.Zygote{Caller: "a", Runtime: "python3.13", Variant: "light"}
	for i := 0; i < 3; i++ {
		if _, _, err := p.get(context.Background(), zc, sandbox.Image{}); err == nil {
			t.Fatal("a failed start served")
		}
	}
	if len(f.started) != 0 {
		t.Errorf("started %d", len(f.started))
	}
}

// Concurrent first calls of one key start one zygote; close retires every
// zygote, one still starting included.
func TestZygotePoolStartsOnceAndCloses(t *testing.T) {
	p, f := newFakePool(t)
	f.gate = make(chan struct{})
	var wg sync.WaitGroup
	got := make([]*fakeZygote, 4)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			z, done, err := p.get(context.Background(), sandbox.Zygote{Caller: "a", Runtime: "r", Variant: "light"}, sandbox.Image{})
			if err == nil {
				done()
			}
			got[i] = z
		}()
	}
	for p.liveCount() == 0 {
		time.Sleep(time.Millisecond)
	}
	close(f.gate)
	wg.Wait()
	for _, z := range got {
		if z != got[0] {
			t.Fatalf("concurrent first calls got several zygotes: %v", got)
		}
	}
	f.gate = make(chan struct{})
	started := make(chan error)
	go func() {
		_, _, err := p.get(context.Background(), sandbox.Zygote{Caller: "b", Runtime: "r", Variant: "light"}, sandbox.Image{})
		started <- err
	}()
	for p.liveCount() != 2 {
		time.Sleep(time.Millisecond)
	}
	p.close()
	close(f.gate)
	if err := <-started; err == nil {
		t.Error("a zygote that finished starting after close served")
	}
	p.wait()
	seen := map[string]bool{}
	for range 2 {
		seen[retiredWithin(t, f).key] = true
	}
	if fmt.Sprint(seen) != "map[a/r/light:true b/r/light:true]" {
		t.Errorf("retired %v", seen)
	}
}
