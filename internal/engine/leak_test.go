package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/leakcheck"
)

// 200 runs in a row (some concurrent, some failing) leave nothing behind.
func TestTwoHundredRunsLeaveNothing(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		before := leakcheck.Take(leakOptsFor(e))
		restartsBefore := testNS.SpawnerRestarts()
		const runs, workers = 200, 4
		var wg sync.WaitGroup
		errs := make(chan error, runs)
		jobs := make(chan int)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range jobs {
					code := fmt.Sprintf("echo run %d; (sleep 60 &); exit %d", i, i%3)
					res, err := e.Exec(context.Background(), execapi.Request{Runtime: "bash", Code: code}, nil)
					switch {
					case err != nil:
						errs <- fmt.Errorf("run %d: %w", i, err)
					case res.Stdout != fmt.Sprintf("run %d\n", i) || res.ExitCode != i%3 || !res.StatePurged:
						errs <- fmt.Errorf("run %d: exit %d stdout %q purged %v", i, res.ExitCode, res.Stdout, res.StatePurged)
					}
				}
			}()
		}
		for i := range runs {
			jobs <- i
		}
		close(jobs)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if left := leakcheck.WaitClean(before, leakOptsFor(e), 5*time.Second); len(left) > 0 {
			t.Errorf("left behind after %d runs:\n  %s", runs, strings.Join(left, "\n  "))
		}
		// Under load the spawner helper must keep serving: the backend
		// quietly replacing it would hide a bug in it.
		if !isGVisor(e) && testNS.SpawnerRestarts() != restartsBefore {
			t.Errorf("the spawner helper died %d times under load", testNS.SpawnerRestarts()-restartsBefore)
		}
	})
}

// A cancelled context kills the sandbox at once and leaves nothing.
func TestCancelKillsSandbox(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		before := leakcheck.Take(leakOptsFor(e))
		ctx, cancel := context.WithCancel(context.Background())
		started := make(chan struct{}, 1)
		go func() {
			<-started
			time.Sleep(200 * time.Millisecond)
			cancel()
		}()
		begin := time.Now()
		_, err := e.Exec(ctx, execapi.Request{Runtime: "bash", Code: "echo hi; sleep 25", Limits: execapi.Limits{TimeoutMS: 30000}},
			func(ev execapi.Event) {
				if ev.Kind == execapi.EventStdout {
					select {
					case started <- struct{}{}:
					default:
					}
				}
			})
		if err == nil {
			t.Fatal("cancelled run returned no error")
		}
		if d := time.Since(begin); d > 10*time.Second {
			t.Errorf("cancel took %s to take effect", d)
		}
		if left := leakcheck.WaitClean(before, leakOptsFor(e), 5*time.Second); len(left) > 0 {
			t.Errorf("left behind after cancel:\n  %s", strings.Join(left, "\n  "))
		}
	})
}
