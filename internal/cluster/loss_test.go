package cluster_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/cluster/frontend"
	"github.com/scratchrun/scratchrun/internal/cluster/worker"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
	"github.com/scratchrun/scratchrun/internal/testenv/natsserver"
)

// A worker that dies with a call (its connection gone at once, as with
// kill -9) gives the caller the lost-worker error within moments; the call
// is never run on the other worker, which keeps taking new calls. A new
// process of the same id does not pick the old call up.
func TestLostWorkerIsAnErrorNeverARerun(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	doomed, other := newEngine("bash"), newEngine("bash")
	hold := make(chan struct{})
	defer close(hold)
	doomed.Respond(func(context.Context, execapitest.Call) execapitest.Response {
		return execapitest.Response{Release: hold}
	})
	other.free.Store(1) // the doomed worker is preferred
	_, conn := startWorker(t, ns.URLs(), "w-doomed", doomed, nil)
	startWorker(t, ns.URLs(), "w-other", other, nil)
	f := startFrontend(t, ns.URLs(), nil)
	waitWorkers(t, f, "w-doomed", "w-other")
	done := make(chan error, 1)
	go func() {
		_, w, err := exec(f, execapi.Request{Runtime: "bash", Code: "x"}, nil)
		if w != "w-doomed" {
			err = errors.New("the call was noted on " + w)
		}
		done <- err
	}()
	waitFor(t, "the run on the doomed worker", func() bool { return doomed.InFlight() == 1 })
	conn.Close()
	start := time.Now()
	err := <-done
	var lost *execapi.WorkerLostError
	if !errors.As(err, &lost) || lost.Worker != "w-doomed" {
		t.Fatalf("call on a dead worker: %v, want a WorkerLostError", err)
	}
	if took := time.Since(start); took > 3*fastFrontend.LostAfter {
		t.Errorf("the loss took %s to show", took)
	}
	if n := len(other.Calls()); n != 0 {
		t.Errorf("the other worker ran %d calls: the lost call was run again", n)
	}
	waitWorkers(t, f, "w-other")
	if _, w, err := exec(f, execapi.Request{Runtime: "bash", Code: "x"}, nil); err != nil || w != "w-other" {
		t.Errorf("a new call after the loss: on %q, %v", w, err)
	}
}

// A worker restarted under the same id while its caller waits: the new
// process does not know the call, and the caller is told it was lost
// (the old process may have run it), not left waiting.
func TestRestartedWorkerIsALoss(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	old := newEngine("bash")
	hold := make(chan struct{})
	defer close(hold)
	old.Respond(func(context.Context, execapitest.Call) execapitest.Response {
		return execapitest.Response{Release: hold}
	})
	_, conn := startWorker(t, ns.URLs(), "w1", old, nil)
	// A front end slow to call a silent worker lost: only the restart can
	// end the call quickly.
	f := startFrontend(t, ns.URLs(), func(c *frontend.Config) { c.Timing.LostAfter, c.Timing.GoneAfter = time.Minute, time.Minute })
	waitWorkers(t, f, "w1")
	done := make(chan error, 1)
	go func() {
		_, _, err := exec(f, execapi.Request{Runtime: "bash", Code: "x"}, nil)
		done <- err
	}()
	waitFor(t, "the run", func() bool { return old.InFlight() == 1 })
	conn.Close()
	startWorker(t, ns.URLs(), "w1", newEngine("bash"), nil)
	select {
	case err := <-done:
		var lost *execapi.WorkerLostError
		if !errors.As(err, &lost) {
			t.Fatalf("call on a restarted worker: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the caller still waits 10 s after its worker restarted")
	}
}

// Shutdown: the worker leaves the registry, refuses new offers (the front
// end places them elsewhere), and the run in flight finishes and reaches
// its caller before Shutdown returns.
func TestShutdownFinishesRunsAndSendsNewCallsElsewhere(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	leaving, staying := newEngine("bash"), newEngine("bash")
	staying.free.Store(1)
	release := make(chan struct{})
	leaving.Respond(func(context.Context, execapitest.Call) execapitest.Response {
		return execapitest.Response{Result: execapitest.Success("finished\n"), Release: release}
	})
	w, _ := startWorker(t, ns.URLs(), "w-leaving", leaving, nil)
	startWorker(t, ns.URLs(), "w-staying", staying, nil)
	f := startFrontend(t, ns.URLs(), nil)
	waitWorkers(t, f, "w-leaving", "w-staying")
	var got atomic.Value
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		res, _, err := exec(f, execapi.Request{Runtime: "bash", Code: "x"}, nil)
		if err != nil {
			got.Store(err.Error())
			return
		}
		got.Store(res.Stdout)
	}()
	waitFor(t, "the run", func() bool { return leaving.InFlight() == 1 })
	shutdown := make(chan error, 1)
	go func() { shutdown <- w.Shutdown(context.Background()) }()
	waitWorkers(t, f, "w-staying")
	for i := 0; i < 5; i++ {
		if _, on, err := exec(f, execapi.Request{Runtime: "bash", Code: "x"}, nil); err != nil || on != "w-staying" {
			t.Errorf("a call during the shutdown: on %q, %v", on, err)
		}
	}
	select {
	case err := <-shutdown:
		t.Fatalf("Shutdown returned (%v) with a run in flight", err)
	default:
	}
	close(release)
	if err := <-shutdown; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got.Load() != "finished\n" {
		t.Errorf("the run in flight during the shutdown ended with %q", got.Load())
	}
	if n := len(leaving.Calls()); n != 1 {
		t.Errorf("the leaving worker ran %d calls, want just the one in flight", n)
	}
}

// Killing a NATS node of a three-node cluster mid-load: the clients move
// to the other nodes and the calls keep succeeding, including those
// whose frames were on the dead node (sent again on the caller's beat).
func TestCallsSurviveTheLossOfANATSNode(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{Nodes: 3})
	urls := ns.URLs()
	eng1, eng2 := newEngine("bash"), newEngine("bash")
	for _, e := range []*engine{eng1, eng2} {
		e.Respond(func(context.Context, execapitest.Call) execapitest.Response {
			return execapitest.Response{Result: execapitest.Success("ok\n"), Delay: 150 * time.Millisecond}
		})
	}
	// Each on its own node first, so that the kill cuts a worker off. The
	// default timings: a node's loss must fit in them.
	defaults := func(c *worker.Config) { c.Timing = worker.Timing{} }
	startWorker(t, []string{urls[0], urls[1], urls[2]}, "w1", eng1, defaults)
	startWorker(t, []string{urls[1], urls[2], urls[0]}, "w2", eng2, defaults)
	f := startFrontend(t, []string{urls[2], urls[0], urls[1]}, func(c *frontend.Config) {
		c.Replicas = 3
		c.QueueWait = 5 * time.Second
		c.Timing = frontend.Timing{}
	})
	waitWorkers(t, f, "w1", "w2")
	var failures atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if res, _, err := exec(f, execapi.Request{Runtime: "bash", Code: "x"}, nil); err != nil || res.Stdout != "ok\n" {
					t.Errorf("a call failed: %v", err)
					failures.Add(1)
				}
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	ns.Kill(0) // w1's node
	time.Sleep(1500 * time.Millisecond)
	ns.Kill(1) // and, once everyone moved on, w2's
	ns.Restart(0)
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()
	if failures.Load() > 0 {
		t.Fatalf("%d calls failed across the loss of NATS nodes", failures.Load())
	}
	if len(eng1.Calls()) == 0 || len(eng2.Calls()) == 0 {
		t.Errorf("calls ran %d and %d on the workers", len(eng1.Calls()), len(eng2.Calls()))
	}
}
