package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/admission"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/sandboxtest"
)

// These run the engine's admission on the fake backend, whose sandboxes
// say what memory they use: the logic alone, in milliseconds. (The
// admission package tests its queue and gauges; the real tests with busy
// loops and many sleeping calls are in admission_real_test.go.)

const mib = 1 << 20

// Calls beyond the memory budget wait and are then refused for memory,
// without a sandbox; the budget is the backend's limit for all sandboxes,
// and what sandboxes use counts against it.
func TestAdmissionRefusesBeyondTheMemoryBudget(t *testing.T) {
	fake := &sandboxtest.Backend{Steps: []sandboxtest.Step{{Memory: 80 * mib, RunDelay: time.Second}}}
	e := newFakeEngine(t, fake, func(c *Config) {
		c.Admission = admission.Settings{MemoryBudget: 100 * mib, CallFloor: 30 * mib, MaxQueue: 10, QueueWait: 200 * time.Millisecond}
	})
	if fake.Budget() != 100*mib {
		t.Errorf("the backend's budget is %d, want the engine's %d", fake.Budget(), 100*mib)
	}
	first := make(chan error, 1)
	go func() {
		_, err := e.Exec(context.Background(), execapi.Request{Runtime: "bash", Code: "sleep 1"}, nil)
		first <- err
	}()
	waitFor(t, "the first call's sandbox", func() bool { return fake.Live() == 1 })
	// Admission decides on its sampler's last reading of memory, at most a
	// sampling period old: wait for a reading that has the sandbox in it
	// (Admission reads the gauge), or this call could come before it and
	// be held to the first call's floor alone.
	waitFor(t, "the gauge to see the sandbox", func() bool { return e.Admission().MemoryUsedBytes == 80*mib })
	// 80 MB in use (and the first call's floor while it starts) and this
	// call's floor: over 100.
	_, err := e.Exec(context.Background(), execapi.Request{Runtime: "bash", Code: "true"}, nil)
	var r *execapi.Refusal
	if !errors.As(err, &r) || r.Reason != execapi.RefusedMemory || r.RetryAfter < time.Second {
		t.Fatalf("beyond the budget: %v", err)
	}
	if fake.Created() != 1 {
		t.Errorf("%d sandboxes created: a refused call reached the backend", fake.Created())
	}
	info, _ := e.Describe(context.Background())
	if a := info.Admission; a == nil || a.MemoryBudgetBytes != 100*mib || a.MemoryUsedBytes != 80*mib || a.Rejections[execapi.RefusedMemory] != 1 {
		t.Errorf("described admission: %+v", a)
	}
	if err := <-first; err != nil {
		t.Fatalf("first call: %v", err)
	}
	// The first call's memory is back: the next call starts.
	if _, err := e.Exec(context.Background(), execapi.Request{Runtime: "bash", Code: "true"}, nil); err != nil {
		t.Errorf("after the first call ended: %v", err)
	}
}

// A call's reservation (its place among those running and its memory
// floor) is released on every way out: success, timeout, memory limit,
// the machine's memory, a sandbox that cannot be created, a run that
// fails, and a caller that goes away. With room for one call and no
// queue, a reservation left behind would refuse the next call at once.
func TestAdmissionReleasedOnEveryPath(t *testing.T) {
	killed := int(syscall.SIGKILL)
	paths := []struct {
		name string
		step sandboxtest.Step
		// cancel, when set, cancels the call once its sandbox runs.
		cancel bool
		want   func(res execapi.Result, err error) bool
	}{
		{"success", sandboxtest.Step{Memory: 10 * mib}, false,
			func(res execapi.Result, err error) bool { return err == nil && res.Outcome == execapi.OutcomeSuccess }},
		{"timeout", sandboxtest.Step{Memory: 10 * mib, RunDelay: time.Minute}, false,
			func(res execapi.Result, err error) bool { return err == nil && res.Outcome == execapi.OutcomeTimeout }},
		{"memory limit", sandboxtest.Step{Memory: 10 * mib, Outcome: sandbox.Outcome{ExitCode: 128 + killed, Signal: killed, OOMKilled: true}}, false,
			func(res execapi.Result, err error) bool {
				return err == nil && res.Outcome == execapi.OutcomeMemoryLimit
			}},
		{"machine memory", sandboxtest.Step{Memory: 10 * mib, Outcome: sandbox.Outcome{ExitCode: 128 + killed, Signal: killed, MachineOOMKilled: true}}, false,
			func(res execapi.Result, err error) bool {
				return err == nil && res.Outcome == execapi.OutcomeMachineMemory
			}},
		{"create error", sandboxtest.Step{CreateErr: errors.New("no sandbox for you")}, false,
			func(_ execapi.Result, err error) bool {
				return err != nil && strings.Contains(err.Error(), "no sandbox for you")
			}},
		{"run error", sandboxtest.Step{Memory: 10 * mib, RunErr: errors.New("init died")}, false,
			func(_ execapi.Result, err error) bool {
				return err != nil && strings.Contains(err.Error(), "init died")
			}},
		{"caller gone", sandboxtest.Step{Memory: 10 * mib, RunDelay: time.Minute}, true,
			func(_ execapi.Result, err error) bool { return errors.Is(err, context.Canceled) }},
	}
	var mu sync.Mutex
	current := sandboxtest.Step{}
	fake := &sandboxtest.Backend{Script: func(int, sandbox.Config) sandboxtest.Step { mu.Lock(); defer mu.Unlock(); return current }}
	e := newFakeEngine(t, fake, func(c *Config) {
		c.Policy.MinTimeout = 10 * time.Millisecond
		c.Admission = admission.Settings{Capacity: 1, QueueWait: -1, MemoryBudget: 100 * mib, CallFloor: 50 * mib}
	})
	for _, p := range paths {
		mu.Lock()
		current = p.step
		mu.Unlock()
		ctx, cancel := context.WithCancel(context.Background())
		if p.cancel {
			go func() {
				waitFor(t, "the sandbox", func() bool { return fake.Live() == 1 })
				cancel()
			}()
		}
		res, err := e.Exec(ctx, execapi.Request{Runtime: "bash", Code: "x", Limits: execapi.Limits{TimeoutMS: 50}}, nil)
		cancel()
		if !p.want(res, err) {
			t.Errorf("%s: outcome %q, err %v", p.name, res.Outcome, err)
		}
		if a := e.Admission(); a.Running != 0 || a.Starting != 0 || a.Waiting != 0 || a.MemoryReservedBytes != 0 {
			t.Errorf("after %s: %+v", p.name, a)
		}
		mu.Lock()
		current = sandboxtest.Step{}
		mu.Unlock()
		if _, err := e.Exec(context.Background(), execapi.Request{Runtime: "bash", Code: "true"}, nil); err != nil {
			t.Errorf("the call after %s: %v", p.name, err)
		}
	}
	if fake.Live() != 0 {
		t.Errorf("%d sandboxes live", fake.Live())
	}
}

// A call killed because the sandboxes together ran out of the machine's
// memory, within its own limit, is told so: exit 137, outcome
// machine_memory, the fact, and a note that says it was the machine.
func TestMachineMemoryOutcome(t *testing.T) {
	killed := int(syscall.SIGKILL)
	fake := &sandboxtest.Backend{Steps: []sandboxtest.Step{{Outcome: sandbox.Outcome{ExitCode: 128 + killed, Signal: killed, MachineOOMKilled: true}}}}
	e := newFakeEngine(t, fake, nil)
	res, err := e.Exec(context.Background(), execapi.Request{Runtime: "bash", Code: "x", Limits: execapi.Limits{MemoryMB: 128}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 137 || res.Outcome != execapi.OutcomeMachineMemory || !res.Facts.MachineMemoryHit || res.Facts.MemoryLimitHit ||
		!strings.Contains(res.Note, "machine ran out of the memory it gives sandboxes") || !strings.Contains(res.Note, "own memory limit of 128 MB") {
		t.Errorf("exit %d outcome %q facts %+v note %q", res.ExitCode, res.Outcome, res.Facts, res.Note)
	}
}

// The warm pool builds within the admission budget, leaving a call's
// floor, and releases idle warm sandboxes before a call would be refused
// for memory: calls that need the room get it, and none is refused.
func TestPoolShrinksBeforeCallsAreRefusedForMemory(t *testing.T) {
	// Each call's sandbox holds its 40 MB until all three run.
	release := make(chan struct{})
	hold := func(ctx context.Context, _ sandbox.Job) (sandbox.Outcome, error) {
		select {
		case <-release:
			return sandbox.Outcome{}, nil
		case <-ctx.Done():
			return sandbox.Outcome{}, ctx.Err()
		}
	}
	fake := &sandboxtest.Backend{Steps: []sandboxtest.Step{{Memory: 40 * mib, Do: hold}}}
	e := newFakeEngine(t, fake, func(c *Config) {
		c.Admission = admission.Settings{MemoryBudget: 120 * mib, CallFloor: 10 * mib, MaxQueue: 10, QueueWait: 100 * time.Millisecond}
		c.Pool = PoolConfig{Floor: 5, Runtimes: []string{"bash"}, Networks: []string{"none"}, IdleAfter: time.Minute}
	})
	// 40 MB each, and a 10 MB floor beside them, within 120 MB: two.
	waitReady(t, e, execapi.PoolKey{Runtime: "bash", Network: "none"}, 2)
	time.Sleep(1500 * time.Millisecond) // a tick of the pool's loop, or more
	if got := e.PoolStats()[execapi.PoolKey{Runtime: "bash", Network: "none"}]; got != 2 {
		t.Fatalf("%d warm sandboxes of 40 MB in a 120 MB budget with a 10 MB floor, want 2", got)
	}
	// Three python calls (cold: the pool keeps bash) running together need
	// the warm sandboxes' memory, and could not wait for each other (100 ms
	// of queue). Each starts once the one before runs and its 40 MB count:
	// three started at once would all be admitted on their 10 MB floors
	// before any sandbox is measured (as happened when creating sandboxes
	// was slow, under -race and load), and none would need the pool's.
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.Exec(context.Background(), execapi.Request{Runtime: "python3.13", Code: "x"}, nil); err != nil {
				t.Errorf("call: %v", err)
			}
		}()
		waitFor(t, "the call to run or be refused", func() bool {
			return fake.Runs() == i+1 || e.Admission().Rejections[execapi.RefusedMemory] > 0
		})
		// Admission decides on its sampler's last reading of memory, at
		// most a sampling period old; Admission reads the gauge now, so
		// that the next call's decision has this call's 40 MB in it
		// rather than its floor.
		e.Admission()
	}
	close(release)
	wg.Wait()
	if got := e.Admission().Rejections[execapi.RefusedMemory]; got != 0 {
		t.Errorf("%d calls refused for memory while warm sandboxes could be released", got)
	}
	if fake.Destroyed() < 4 {
		t.Errorf("%d sandboxes destroyed: the warm ones were not released", fake.Destroyed())
	}
}

// waitFor polls cond until it holds; the bound only catches hangs.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Errorf("timed out waiting for %s", what)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// A backend behind a wrapper (the pool tests' recorder) still gives the
// engine its memory gauge: the engine finds it through Unwrap. Before, a
// wrapper hid it, and the engine ran without a memory budget on the
// backend or a measure of its sandboxes' memory.
func TestWrappedBackendKeepsItsMemoryGauge(t *testing.T) {
	fake := &sandboxtest.Backend{}
	fake.OtherMemory.Store(30 * mib)
	rec := &runRecorder{Backend: fake, runs: map[string]int{}}
	e := newFakeEngine(t, rec, func(c *Config) {
		c.Admission = admission.Settings{MemoryBudget: 100 * mib, CallFloor: 10 * mib}
	})
	if fake.Budget() != 100*mib {
		t.Errorf("the wrapped backend's budget is %d, want the engine's %d", fake.Budget(), 100*mib)
	}
	info, _ := e.Describe(context.Background())
	if a := info.Admission; a == nil || a.MemoryBudgetBytes != 100*mib || a.MemoryUsedBytes != 30*mib {
		t.Errorf("described admission: %+v; want 30 MiB used of 100", a)
	}
}
