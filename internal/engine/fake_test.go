package engine

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/engine/enginetest"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/sandboxtest"
)

// newFakeEngine returns an engine over the catalog's runtimes, no image
// installed (package enginetest), and a fake backend (package
// sandboxtest): for tests of the engine's own logic, which need no real
// sandbox, root or image. The engine is closed when the test ends.
func newFakeEngine(t testing.TB, b sandbox.Backend, mutate func(*Config)) *Engine {
	t.Helper()
	cfg := DefaultConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	e, err := New(cfg, enginetest.NewImages(t), b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// echoNumber plays a bash sandbox running "echo N; ...": it prints N, so
// that each call can tell its own output.
func echoNumber(_ context.Context, job sandbox.Job) (sandbox.Outcome, error) {
	for _, f := range job.Files {
		var n int
		if strings.HasPrefix(f.Path, "/code/") {
			if _, err := fmt.Sscanf(string(f.Data), "echo %d;", &n); err == nil {
				_, _ = io.WriteString(job.Stdout, fmt.Sprintf("%d\n", n))
			}
		}
	}
	return sandbox.Outcome{}, nil
}

// Under concurrent load no pooled sandbox serves two calls, the pool grows
// with demand, refills, shrinks back to its floor when idle, and leaves
// nothing at shutdown. This is the pool's logic: the backend is a fake
// whose sandboxes run for 200 ms and print the number their call's code
// echoes. (The warm tests in pool_test.go run the pool on real sandboxes.)
func TestPoolNeverReusesGrowsAndShrinks(t *testing.T) {
	fake := &sandboxtest.Backend{Steps: []sandboxtest.Step{{RunDelay: 200 * time.Millisecond, Do: echoNumber}}}
	rec := &runRecorder{Backend: fake, runs: map[string]int{}}
	cfg := DefaultConfig()
	cfg.Pool = PoolConfig{Floor: 1, Max: 3, Runtimes: []string{"bash"}, Networks: []string{"none"}, IdleAfter: 1500 * time.Millisecond}
	e, err := New(cfg, enginetest.NewImages(t, "bash"), rec)
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, e, execapi.PoolKey{Runtime: "bash", Network: "none"}, 1)
	var wg sync.WaitGroup
	for i := 0; i < 24; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, err := e.Exec(context.Background(), execapi.Request{Runtime: "bash", Code: fmt.Sprintf("echo %d; sleep 0.2", i)}, nil)
			if err != nil || res.Stdout != fmt.Sprintf("%d\n", i) {
				t.Errorf("call %d: %v %q", i, err, res.Stdout)
			}
		}(i)
	}
	wg.Wait()
	rec.mu.Lock()
	for id, n := range rec.runs {
		if n != 1 {
			t.Errorf("sandbox %s ran %d jobs", id, n)
		}
	}
	rec.mu.Unlock()
	// Demand peaked above the floor: the pool grows toward Max...
	waitReady(t, e, execapi.PoolKey{Runtime: "bash", Network: "none"}, 3)
	// ...and shrinks back to the floor once idle.
	deadline := time.Now().Add(30 * time.Second)
	for e.PoolStats()[execapi.PoolKey{Runtime: "bash", Network: "none"}] != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("pool did not shrink to its floor: %v", e.PoolStats())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if fake.Live() != 0 || fake.Closed() != 1 {
		t.Errorf("after the engine closed: %d sandboxes live, backend closed %d times", fake.Live(), fake.Closed())
	}
}

// The pool builds no more ready sandboxes than its memory budget holds,
// measured with each sandbox's MemoryUsage.
func TestPoolStaysWithinMemoryBudget(t *testing.T) {
	fake := &sandboxtest.Backend{Steps: []sandboxtest.Step{{Memory: 40 << 20}}}
	cfg := DefaultConfig()
	cfg.Pool = PoolConfig{Floor: 5, Max: 5, MemoryBudgetBytes: 100 << 20, Runtimes: []string{"bash"}, Networks: []string{"none"}, IdleAfter: time.Minute}
	e, err := New(cfg, enginetest.NewImages(t, "bash"), fake)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// 40 MB each within 100 MB: the third takes the pool over its budget,
	// and no fourth is built.
	waitReady(t, e, execapi.PoolKey{Runtime: "bash", Network: "none"}, 3)
	time.Sleep(1500 * time.Millisecond) // a tick of the pool's loop, or more
	if got := e.PoolStats()[execapi.PoolKey{Runtime: "bash", Network: "none"}]; got != 3 {
		t.Errorf("%d ready sandboxes of 40 MB within a 100 MB budget, want 3", got)
	}
	if got := e.PoolMemory()[execapi.PoolKey{Runtime: "bash", Network: "none"}]; got != 40<<20 {
		t.Errorf("pool memory %d, want %d per sandbox", got, 40<<20)
	}
}
