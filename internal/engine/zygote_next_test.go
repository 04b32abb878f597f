package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/admission"
	"github.com/scratchrun/scratchrun/internal/engine/enginetest"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/sandboxtest"
)

// The logic of callers' next sandboxes (nextSandboxes), over the fake
// backend: which sandbox serves which call, and that every one made is
// destroyed. The real zygote's sandboxes are in fresh_state_test.go.

// newZygoteFakeEngine is a fake engine with zygotes on for python3.13,
// whose light calls are then made from zygotes (the pool keeps none).
func newZygoteFakeEngine(t *testing.T, fake *sandboxtest.Backend, idle time.Duration) *Engine {
	t.Helper()
	fake.Zygotes = true
	cfg := DefaultConfig()
	cfg.Zygote = true
	cfg.Pool = PoolConfig{Floor: 1, Runtimes: []string{"python3.13"}, Networks: []string{"none"}, Variants: []string{variantLight}, IdleAfter: idle}
	e, err := New(cfg, enginetest.NewImages(t, "python3.13"), fake)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func callAs(t *testing.T, e *Engine, caller string) {
	t.Helper()
	ctx := execapi.WithCaller(context.Background(), caller)
	if _, err := e.Exec(ctx, execapi.Request{Runtime: "python3.13", Code: "print(1)"}, nil); err != nil {
		t.Fatalf("%s's call: %v", caller, err)
	}
}

// zygoteCallers lists, in order, the callers whose zygotes the sandboxes
// created were asked of ("" for one asked of none).
func zygoteCallers(fake *sandboxtest.Backend) []string {
	var out []string
	for _, c := range fake.Configs() {
		if c.Zygote == nil {
			out = append(out, "")
			continue
		}
		out = append(out, c.Zygote.Caller)
	}
	return out
}

// A caller's first call makes its sandbox on its path; when it ends, the
// caller's next sandbox is made from its zygote, and the next call runs in
// it: N calls make N+1 sandboxes, each from that caller's zygote, each
// running one job; Close destroys the one left.
func TestNextSandboxIsMadeWhenACallEnds(t *testing.T) {
	fake := &sandboxtest.Backend{}
	e := newZygoteFakeEngine(t, fake, time.Minute)
	for i := range 5 {
		callAs(t, e, "alice")
		waitFor(t, "alice's next sandbox made", func() bool { return e.next.count() == 1 })
		if got := fake.Created(); got != i+2 {
			t.Fatalf("after %d calls: %d sandboxes made, want %d", i+1, got, i+2)
		}
	}
	for i, c := range zygoteCallers(fake) {
		if c != "alice" {
			t.Errorf("sandbox %d asked of %q's zygote, want alice's", i, c)
		}
	}
	if fake.Runs() != 5 || fake.Live() != 1 {
		t.Errorf("runs %d, live %d: want 5 runs and alice's next sandbox", fake.Runs(), fake.Live())
	}
	e.Close()
	if fake.Live() != 0 || fake.Retired() != 1 {
		t.Errorf("after Close: %d live, zygotes retired %d times", fake.Live(), fake.Retired())
	}
}

// A caller's next sandbox serves no other caller: bob's first call makes
// its own from bob's zygote while alice's waits.
func TestNextSandboxServesItsCallerOnly(t *testing.T) {
	fake := &sandboxtest.Backend{}
	e := newZygoteFakeEngine(t, fake, time.Minute)
	callAs(t, e, "alice")
	waitFor(t, "alice's next sandbox", func() bool { return e.next.count() == 1 })
	callAs(t, e, "bob")
	waitFor(t, "bob's next sandbox", func() bool { return e.next.count() == 2 })
	want := []string{"alice", "alice", "bob", "bob"}
	if got := zygoteCallers(fake); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("zygotes asked: %v, want %v", got, want)
	}
	if fake.Runs() != 2 || fake.Live() != 2 {
		t.Errorf("runs %d, live %d", fake.Runs(), fake.Live())
	}
}

// A call that comes while its sandbox is still being made waits for that
// one rather than make a second: no other sandbox is asked for until the
// one being made is, and the call ends only after it.
func TestCallWaitsForItsNextSandboxBeingMade(t *testing.T) {
	gate := make(chan struct{})
	fake := &sandboxtest.Backend{Script: func(n int, _ sandbox.Config) sandboxtest.Step {
		if n == 1 {
			<-gate // alice's next sandbox, made while her first call runs
		}
		return sandboxtest.Step{}
	}}
	e := newZygoteFakeEngine(t, fake, time.Minute)
	callAs(t, e, "alice")
	done := make(chan struct{})
	go func() {
		defer close(done)
		callAs(t, e, "alice")
	}()
	time.Sleep(200 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("the second call ended while its sandbox was still being made")
	default:
	}
	if n := len(fake.Configs()); n != 2 {
		t.Errorf("%d sandboxes asked for while the second call waited, want 2 (the first call's, the one being made)", n)
	}
	close(gate)
	<-done
	waitFor(t, "the next one after", func() bool { return e.next.count() == 1 })
	if fake.Created() != 3 || fake.Runs() != 2 {
		t.Errorf("%d sandboxes made for 2 calls (want 3: the first, the one waited for, the next), %d runs", fake.Created(), fake.Runs())
	}
}

// At most maxNextSandboxes callers have one; the least recently served
// loses it first. Many callers at once: every call runs in a sandbox of
// its own, and nothing is left once the engine closed.
func TestNextSandboxesAreBounded(t *testing.T) {
	fake := &sandboxtest.Backend{Steps: []sandboxtest.Step{{RunDelay: 20 * time.Millisecond}}}
	e := newZygoteFakeEngine(t, fake, time.Minute)
	for i := range maxNextSandboxes + 3 {
		callAs(t, e, fmt.Sprintf("caller-%d", i))
		waitFor(t, "the caller's next sandbox", func() bool { return e.next.count() == min(i+1, maxNextSandboxes) })
	}
	if fake.Live() != maxNextSandboxes {
		t.Errorf("%d sandboxes live, want %d", fake.Live(), maxNextSandboxes)
	}
	for i := range 3 {
		if e.next.has(fmt.Sprintf("caller-%d", i)) {
			t.Errorf("caller-%d, the least recently served, kept its next sandbox", i)
		}
	}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			callAs(t, e, fmt.Sprintf("caller-%d", i%12))
		}()
	}
	wg.Wait()
	e.Close()
	if fake.Live() != 0 {
		t.Errorf("%d sandboxes left after Close", fake.Live())
	}
	if fake.Runs() != maxNextSandboxes+3+40 {
		t.Errorf("%d runs", fake.Runs())
	}
}

// A caller idle for the pool's IdleAfter loses its next sandbox.
func TestNextSandboxIsDroppedWhenItsCallerIsIdle(t *testing.T) {
	fake := &sandboxtest.Backend{}
	e := newZygoteFakeEngine(t, fake, 200*time.Millisecond)
	callAs(t, e, "alice")
	waitFor(t, "alice's next sandbox made, then dropped after she was idle", func() bool {
		return fake.Created() == 2 && fake.Live() == 0
	})
	if e.next.count() != 0 {
		t.Errorf("%d next sandboxes kept", e.next.count())
	}
}

// A call that waits for memory gets what callers' next sandboxes hold
// (admission's Reclaim asks them first): with alice's next sandbox (40
// MB) kept, bob's call holding 40 MB and a 30 MB floor for each call in
// a 100 MB budget, carol's call fits only once alice's is destroyed.
func TestNextSandboxesGiveWayToCallsWaitingForMemory(t *testing.T) {
	release := make(chan struct{})
	hold := func(ctx context.Context, job sandbox.Job) (sandbox.Outcome, error) {
		if string(job.Files[len(job.Files)-1].Data) != "hold" {
			return sandbox.Outcome{}, nil
		}
		select {
		case <-release:
			return sandbox.Outcome{}, nil
		case <-ctx.Done():
			return sandbox.Outcome{}, ctx.Err()
		}
	}
	fake := &sandboxtest.Backend{Zygotes: true, Steps: []sandboxtest.Step{{Memory: 40 * mib, Do: hold}}}
	e := newFakeEngine(t, fake, func(c *Config) {
		c.Zygote = true
		c.Admission = admission.Settings{MemoryBudget: 100 * mib, CallFloor: 30 * mib, MaxQueue: 10, QueueWait: 2 * time.Second}
		c.Pool = PoolConfig{Floor: 1, Runtimes: []string{"python3.13"}, Networks: []string{"none"}, Variants: []string{variantLight}, IdleAfter: time.Minute}
	})
	callAs(t, e, "alice")
	waitFor(t, "alice's next sandbox", func() bool { return e.next.count() == 1 })
	var wg sync.WaitGroup
	for _, caller := range []string{"bob", "carol"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := execapi.WithCaller(context.Background(), caller)
			if _, err := e.Exec(ctx, execapi.Request{Runtime: "python3.13", Code: "hold"}, nil); err != nil {
				t.Errorf("%s's call: %v", caller, err)
			}
		}()
		waitFor(t, caller+"'s call running", func() bool { return fake.Runs() == map[string]int{"bob": 2, "carol": 3}[caller] })
		e.Admission() // reads memory now, so that carol's decision sees bob's 40 MB
	}
	if e.next.has("alice") {
		t.Error("alice's next sandbox was kept while carol's call needed its memory")
	}
	close(release)
	wg.Wait()
	if got := e.Admission().Rejections[execapi.RefusedMemory]; got != 0 {
		t.Errorf("%d calls refused for memory while a next sandbox could be released", got)
	}
}

// has reports whether caller has a next sandbox (made or being made) of
// any key.
func (n *nextSandboxes) has(caller string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ck := range n.next {
		if ck.caller == caller {
			return true
		}
	}
	return false
}

// With zygotes on the pool keeps heavy sandboxes and no light one: a
// caller's first heavy call runs in the pool's (its heavy zygote's
// preloads take seconds), and its next ones in sandboxes of its heavy
// zygote, asked to preload the runtime's modules with OpenBLAS on one
// thread.
func TestFirstHeavyCallRunsInThePoolsSandbox(t *testing.T) {
	var mu sync.Mutex
	var ran []string // what made the sandbox of each call, in order
	fake := &sandboxtest.Backend{Zygotes: true, Script: func(_ int, cfg sandbox.Config) sandboxtest.Step {
		from := "the pool"
		if z := cfg.Zygote; z != nil {
			from = z.Caller + "'s " + z.Variant + " zygote"
			if !slices.Contains(z.Env, "OPENBLAS_NUM_THREADS=1") || !slices.Contains(z.Env, "SCRATCHRUN_PRELOAD=numpy,pandas,matplotlib.pyplot") {
				from += " (without the heavy preloads)"
			}
		} else if cfg.Prestart == nil || !slices.Contains(cfg.Prestart.Env, "SCRATCHRUN_PRELOAD=numpy,pandas,matplotlib.pyplot") {
			from = "a sandbox not the pool's heavy one"
		}
		return sandboxtest.Step{Do: func(context.Context, sandbox.Job) (sandbox.Outcome, error) {
			mu.Lock()
			defer mu.Unlock()
			ran = append(ran, from)
			return sandbox.Outcome{}, nil
		}}
	}}
	cfg := DefaultConfig()
	cfg.Zygote = true
	cfg.Pool = PoolConfig{Floor: 1, Runtimes: []string{"python3.13"}, Networks: []string{"none"}, IdleAfter: time.Minute}
	e, err := New(cfg, enginetest.NewImages(t, "python3.13"), fake)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	heavy := execapi.PoolKey{Runtime: "python3.13", Network: "none", Variant: variantHeavy}
	waitFor(t, "the pool's heavy sandbox", func() bool { return e.pool.stats()[heavy] == 1 })
	if got := e.pool.stats(); len(got) != 1 {
		t.Errorf("the pool keeps %v, want the heavy key only", got)
	}
	ctx := execapi.WithCaller(context.Background(), "alice")
	for range 3 {
		if _, err := e.Exec(ctx, execapi.Request{Runtime: "python3.13", Code: "import numpy\nprint(1)"}, nil); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "alice's next heavy sandbox", func() bool { return e.next.count(heavy) == 1 })
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"the pool", "alice's heavy zygote", "alice's heavy zygote"}
	if fmt.Sprint(ran) != fmt.Sprint(want) {
		t.Errorf("the calls ran in sandboxes of %q, want %q", ran, want)
	}
}
