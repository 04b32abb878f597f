//go:build hostile

package engine

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/admission"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/leakcheck"
)

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// 200 calls that sleep, all at once, all admitted (the memory budget
// holds them; the CPU condition is off so that a busy machine cannot
// stretch the test): every one succeeds with its teardown verified, 200
// run at the same moment, and afterwards nothing is left: no process,
// mount, cgroup or namespace of a sandbox, no descriptor of the engine's,
// no reservation in admission.
func TestTwoHundredSleepingCallsLeaveNothing(t *testing.T) {
	newTestEngine(t, nil)
	before := leakcheck.Take(leakOpts)
	fdsBefore := openFDs(t)
	e := newTestEngine(t, func(c *Config) {
		c.Admission = admission.Defaults(admission.MachineMemory())
		c.Admission.CPUThreshold = 0
		c.Admission.QueueWait = 0 // wait as long as it takes
	})
	const calls = 200
	var wg sync.WaitGroup
	errs := make(chan string, calls)
	peak := 0
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
				peak = max(peak, e.Admission().Running)
			}
		}
	}()
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.Exec(context.Background(), execapi.Request{Runtime: "python3.13", Code: "import time; time.sleep(3); print('ok')",
				Limits: execapi.Limits{TimeoutMS: 30000}}, nil)
			switch {
			case err != nil:
				errs <- err.Error()
			case res.ExitCode != 0 || res.Stdout != "ok\n" || !res.StatePurged:
				errs <- res.Note
			}
		}()
	}
	wg.Wait()
	close(stop)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if peak < calls {
		t.Errorf("at most %d of %d calls ran at once", peak, calls)
	}
	if a := e.Admission(); a.Running != 0 || a.Starting != 0 || a.Waiting != 0 {
		t.Errorf("admission after the calls: %+v", a)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if left := leakcheck.WaitClean(before, leakOpts, 30*time.Second); len(left) > 0 {
		t.Errorf("left behind:\n  %s", strings.Join(left, "\n  "))
	}
	deadline := time.Now().Add(10 * time.Second)
	for openFDs(t) > fdsBefore && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := openFDs(t); n > fdsBefore {
		t.Errorf("%d descriptors open after the calls, %d before", n, fdsBefore)
	}
}
