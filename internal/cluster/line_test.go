package cluster_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/cluster/frontend"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
	"github.com/scratchrun/scratchrun/internal/testenv/natsserver"
)

// A call that waits for room is not overtaken by the calls that arrive
// meanwhile: with one sandbox and two clients sending calls back to back
// (each the moment its last ended, so taking the sandbox it just freed),
// a third client's calls are each served within the queue wait.
func TestWaitingCallsAreNotOvertaken(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	eng := newEngine("bash")
	var busy atomic.Bool
	eng.Respond(func(context.Context, execapitest.Call) execapitest.Response {
		if !busy.CompareAndSwap(false, true) {
			return execapitest.Response{Err: &execapi.Refusal{Reason: execapi.RefusedAtCapacity, RetryAfter: time.Second}}
		}
		release := make(chan struct{})
		time.AfterFunc(30*time.Millisecond, func() { busy.Store(false); close(release) })
		return execapitest.Response{Release: release, Result: execapitest.Success("ok\n")}
	})
	startWorker(t, ns.URLs(), "w-one", eng, nil)
	const queueWait = 1500 * time.Millisecond
	f := startFrontend(t, ns.URLs(), func(c *frontend.Config) { c.QueueWait = queueWait })
	waitWorkers(t, f, "w-one")
	req := execapi.Request{Runtime: "bash", Code: "x"}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var hogged atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, _, err := exec(f, req, nil); err == nil {
					hogged.Add(1)
				}
			}
		}()
	}
	time.Sleep(200 * time.Millisecond) // the two clients have the sandbox going
	for i := range 5 {
		start := time.Now()
		if _, _, err := exec(f, req, nil); err != nil {
			t.Errorf("call %d of the third client, after %s: %v (the back-to-back clients ran %d calls)",
				i, time.Since(start).Round(time.Millisecond), err, hogged.Load())
		}
	}
	close(stop)
	wg.Wait()
}
