package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/admission"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/leakcheck"
)

// These run admission on real sandboxes and the machine's own gauges.

// Under sustained CPU saturation (two busy loops per CPU, as many
// CPU-bound calls as admission lets run) a new call waits the queue wait
// and is refused for cpu, with when to retry; the busy loops are seen
// computing by their sandboxes' own CPU demand; nothing is left.
func TestBusyLoopsSaturateAndNewCallsAreRefused(t *testing.T) {
	newTestEngine(t, nil) // the store and backend, before the snapshot
	before := leakcheck.Take(leakOpts)
	e := newTestEngine(t, func(c *Config) {
		c.Admission = admission.Settings{CPUThreshold: admission.DefaultCPUThreshold, QueueWait: time.Second, MaxQueue: 10}
	})
	loops := 2 * runtime.NumCPU()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	ended := make(chan string, loops)
	for range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A machine already busy may refuse them too: retry until
			// admitted (or the test ends).
			for ctx.Err() == nil {
				res, err := e.Exec(ctx, execapi.Request{Runtime: "python3.13", Code: "while True:\n    pass\n", Limits: execapi.Limits{TimeoutMS: 30000}}, nil)
				if !errors.Is(err, execapi.ErrAtCapacity) {
					if ctx.Err() == nil {
						ended <- fmt.Sprintf("a busy loop ended: %v (exit %d, %s)", err, res.ExitCode, res.Note)
					}
					return
				}
			}
		}()
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		a := e.Admission()
		if a.Running == loops && a.CPUBound == loops {
			break
		}
		select {
		case why := <-ended:
			t.Fatal(why)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the busy loops were never all seen computing: %+v", a)
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	_, err := e.Exec(context.Background(), execapi.Request{Runtime: "bash", Code: "true"}, nil)
	var r *execapi.Refusal
	if !errors.As(err, &r) || r.Reason != execapi.RefusedCPU || r.RetryAfter < time.Second {
		t.Errorf("a call while %d busy loops saturate %d CPUs: %v", loops, runtime.NumCPU(), err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("refused after %s, before the queue wait", waited)
	}
	cancel()
	wg.Wait()
	if a := e.Admission(); a.Running != 0 || a.Rejections[execapi.RefusedCPU] == 0 {
		t.Errorf("after the busy loops: %+v", a)
	}
	e.Close()
	if left := leakcheck.WaitClean(before, leakOpts, 10*time.Second); len(left) > 0 {
		t.Errorf("left behind:\n  %s", strings.Join(left, "\n  "))
	}
}

// When the sandboxes together outgrow the machine's budget (their cgroup
// parent's limit), the kernel kills inside the parent, and the call it
// hits, though within its own memory_mb, is told that the machine ran
// out: exit 137, outcome machine_memory, and a note saying so. Neither
// call reports its own limit.
func TestMachineMemoryKillIsReportedAsTheMachines(t *testing.T) {
	newTestEngine(t, nil)
	backend := budgetLevel.Backend(t)
	before := budgetLevel.Snapshot()
	e := newEngineOn(t, backend, func(cfg *Config) {
		cfg.Admission = admission.Settings{MemoryBudget: 256 << 20, CallFloor: 16 << 20}
	})
	// 150 MiB each, both well within their 400 MB limits, 300 together.
	const take = "import time\nheld = b'x' * (150 << 20)\nprint('holding', flush=True)\ntime.sleep(%s)\n"
	results := make(chan execapi.Result, 2)
	call := func(code string) {
		res, err := e.Exec(context.Background(), execapi.Request{Runtime: "python3.13", Code: code, Limits: execapi.Limits{MemoryMB: 400, TimeoutMS: 30000}}, nil)
		if err != nil {
			t.Errorf("call: %v", err)
		}
		results <- res
	}
	go call(strings.Replace(take, "%s", "8", 1))
	deadline := time.Now().Add(60 * time.Second)
	for e.Admission().MemoryUsedBytes < 150<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("the first call never took its memory: %+v", e.Admission())
		}
		time.Sleep(20 * time.Millisecond)
	}
	go call(strings.Replace(take, "%s", "1", 1))
	var machine int
	for range 2 {
		res := <-results
		if res.Outcome == execapi.OutcomeMemoryLimit || res.Facts.MemoryLimitHit {
			t.Errorf("a call within its own limit reports that limit: %+v", res)
		}
		if res.Outcome == execapi.OutcomeMachineMemory {
			machine++
			if res.ExitCode != 137 || !res.Facts.MachineMemoryHit || !strings.Contains(res.Note, "machine ran out of the memory it gives sandboxes") {
				t.Errorf("the machine's kill: exit %d facts %+v note %q", res.ExitCode, res.Facts, res.Note)
			}
		}
	}
	if machine == 0 {
		t.Errorf("300 MiB in a 256 MiB budget: no call was killed for the machine")
	}
	e.Close()
	budgetLevel.CheckClean(t, before)
}
