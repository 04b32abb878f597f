package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/scratchrun/scratchrun/internal/admission"
	"github.com/scratchrun/scratchrun/internal/execapi"
)

// AdmissionRate is how fast a controller admits and releases calls with
// nothing else to do: the cost of its bookkeeping alone.
type AdmissionRate struct {
	// Running is how many calls held sandboxes meanwhile.
	Running int `json:"running"`
	// PerSecond is admissions (Acquire then Release) per second of wall
	// time; CPUPerCallUS this process's CPU time (user and system, every
	// thread: the callers and the controller's sampler) per admission, in
	// microseconds, which other work on the machine does not inflate.
	PerSecond    float64 `json:"per_second"`
	CPUPerCallUS float64 `json:"cpu_us_per_call"`
	// Refused counts admissions turned away (they count in the rate: an
	// answer is an answer).
	Refused int `json:"refused"`
	// LoadAverage is /proc/loadavg's averages when the measurement ended.
	LoadAverage string `json:"load_average"`
}

// MeasureAdmission runs count admissions of c, split over goroutines, each
// Acquire immediately followed by its ticket's Started and Release, as an
// engine's calls would go through it were their sandboxes free.
func MeasureAdmission(ctx context.Context, c *admission.Controller, count, goroutines int) (AdmissionRate, error) {
	if goroutines < 1 {
		goroutines = 1
	}
	r := AdmissionRate{Running: c.Running()}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		refused int
		failed  error
	)
	cpu0 := processCPU()
	start := time.Now()
	for g := range goroutines {
		n := count / goroutines
		if g < count%goroutines {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			caller := fmt.Sprintf("bench-%d", g)
			for range n {
				t, err := c.Acquire(ctx, caller, time.Second)
				var refusal *execapi.Refusal
				switch {
				case errors.As(err, &refusal):
					mu.Lock()
					refused++
					mu.Unlock()
				case err != nil:
					mu.Lock()
					failed = err
					mu.Unlock()
					return
				default:
					// As a call whose sandbox started and is gone: one
					// released before its job began keeps its floor
					// until memory is read (it may have made a
					// session's sandbox).
					t.Started(nil)
					t.Release(0)
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	cpu := processCPU() - cpu0
	if failed != nil {
		return r, failed
	}
	r.PerSecond = float64(count) / wall.Seconds()
	r.CPUPerCallUS = float64(cpu.Nanoseconds()) / 1000 / float64(count)
	r.Refused = refused
	r.LoadAverage = loadAverage()
	return r, nil
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Sleepers are calls that hold sandboxes doing nothing (HoldSleepers).
type Sleepers struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	errs   []error
}

// sleeperCode waits far longer than any measurement; the calls are
// cancelled when it ends.
const sleeperCode = "import time; time.sleep(3600)"

// HoldSleepers starts n calls of runtime that sleep, through ex, and
// returns once running reports n of them admitted and settled (running
// is the executor's count of calls running and starting, e.g. from its
// admission Info), or when ctx ends or a call fails. timeout is each
// call's limit, longer than the measurement they are held for.
func HoldSleepers(ctx context.Context, ex execapi.Executor, runtime string, n int, timeout time.Duration,
	running func() (running, starting int)) (*Sleepers, error) {
	callCtx, cancel := context.WithCancel(context.Background())
	s := &Sleepers{cancel: cancel}
	failed := make(chan struct{}, n)
	for range n {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			_, err := ex.Exec(callCtx, execapi.Request{Runtime: runtime, Code: sleeperCode,
				Limits: execapi.Limits{TimeoutMS: int(timeout.Milliseconds())}}, nil)
			if callCtx.Err() == nil {
				if err == nil {
					err = errors.New("a sleeping call ended before it was cancelled")
				}
				s.mu.Lock()
				s.errs = append(s.errs, err)
				s.mu.Unlock()
				failed <- struct{}{}
			}
		}()
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if r, st := running(); r >= n && st == 0 {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return s, errors.Join(ctx.Err(), s.Stop())
		case <-failed:
			return s, s.Stop()
		case <-tick.C:
		}
	}
}

// Stop cancels the sleeping calls and waits until every one has returned
// (its sandbox torn down); it reports the calls that failed before.
func (s *Sleepers) Stop() error {
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.errs...)
}
