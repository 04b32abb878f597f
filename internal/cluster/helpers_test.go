package cluster_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/cluster/frontend"
	"github.com/scratchrun/scratchrun/internal/cluster/worker"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
)

// These tests run front ends and workers over real NATS servers started
// in the test's process, with scripted engines (execapitest) in place of
// sandboxes: what they prove is the placement, the protocol and its
// failures, which no sandbox changes. The cluster's tests on real
// processes, real sandboxes and PostgreSQL are cmd/scratchrun's.

// fast are timings a tenth of the defaults', so that losses show in
// moments.
var (
	fastWorker = worker.Timing{Beat: 100 * time.Millisecond, CallerLost: 800 * time.Millisecond, GoWait: 2 * time.Second,
		KeepFinished: 3 * time.Second, Resend: 100 * time.Millisecond}
	fastFrontend = frontend.Timing{Beat: 100 * time.Millisecond, LostAfter: 800 * time.Millisecond,
		GoneAfter: 600 * time.Millisecond, ReadyWait: time.Second, LiveWindow: 600 * time.Millisecond}
)

// engine is a scripted engine with an admission the test sets.
type engine struct {
	*execapitest.Service
	free atomic.Int64
}

func newEngine(runtimes ...string) *engine {
	e := &engine{Service: execapitest.New(runtimes...)}
	e.free.Store(8)
	return e
}

func (e *engine) Admission() execapi.AdmissionInfo {
	return execapi.AdmissionInfo{Free: int(e.free.Load()), Running: e.InFlight(), Capacity: 8}
}

// connect opens a NATS connection for the test, closed when it ends.
func connect(t *testing.T, urls []string, name string) *nats.Conn {
	t.Helper()
	nc, err := cluster.Connect(cluster.ConnOptions{URLs: urls, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// startWorker starts a worker over eng, closed when the test ends.
func startWorker(t *testing.T, urls []string, id string, eng worker.Engine, mutate func(*worker.Config)) (*worker.Worker, *nats.Conn) {
	t.Helper()
	nc := connect(t, urls, id)
	cfg := worker.Config{ID: id, Conn: nc, Engine: eng, Version: "test", Timing: fastWorker}
	if mutate != nil {
		mutate(&cfg)
	}
	w, err := worker.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w, nc
}

// startFrontend starts a front end, closed when the test ends.
func startFrontend(t *testing.T, urls []string, mutate func(*frontend.Config)) *frontend.Frontend {
	t.Helper()
	f, _ := startFrontendConn(t, urls, mutate)
	return f
}

// startFrontendConn is startFrontend, with the front end's connection.
func startFrontendConn(t *testing.T, urls []string, mutate func(*frontend.Config)) (*frontend.Frontend, *nats.Conn) {
	t.Helper()
	nc := connect(t, urls, "frontend")
	cfg := frontend.Config{Conn: nc, Policy: execapi.DefaultPolicy(), Timing: fastFrontend, Replicas: 1}
	if mutate != nil {
		mutate(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, err := frontend.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f, nc
}

// waitWorkers waits until the front end sees exactly the workers ids.
func waitWorkers(t *testing.T, f *frontend.Frontend, ids ...string) {
	t.Helper()
	waitFor(t, "the front end to see "+join(ids), func() bool {
		live := f.Workers()
		if len(live) != len(ids) {
			return false
		}
		for i, w := range live {
			if w.ID != ids[i] {
				return false
			}
		}
		return true
	})
}

func join(ids []string) string {
	s := ""
	for i, id := range ids {
		if i > 0 {
			s += ","
		}
		s += id
	}
	return "[" + s + "]"
}

// waitFor polls cond; the bound only catches hangs.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// exec runs one call through f with a caller, and its worker as the front
// end named it.
func exec(f *frontend.Frontend, req execapi.Request, events execapi.EventSink) (execapi.Result, string, error) {
	res, err := f.Exec(execapi.WithCaller(context.Background(), "key_test"), req, events)
	return res, execapi.WorkerOf(res, err), err
}

// startScriptedCall plays a front end by hand on worker w1: it offers call
// c1 (bash, with timeoutMS), checks the worker is ready, and sends the go.
// It returns its connection, the subscription the worker's answers arrive
// on, and the call's subject and reply subject.
func startScriptedCall(t *testing.T, urls []string, name string, timeoutMS int) (nc *nats.Conn, answers *nats.Subscription, subject, reply string) {
	t.Helper()
	nc = connect(t, urls, name)
	inbox := nats.NewInbox()
	answers, err := nc.SubscribeSync(inbox + ".*")
	if err != nil {
		t.Fatal(err)
	}
	reply, subject = inbox+".c1", cluster.CallSubject("w1", "c1")
	body, _ := json.Marshal(execapi.Request{Runtime: "bash", Code: "x", Limits: execapi.Limits{TimeoutMS: timeoutMS, MemoryMB: 128}})
	offer := cluster.NewFrame(subject, reply, cluster.KindOffer, body)
	cluster.SetInt(offer, cluster.HeaderParts, 1)
	nc.PublishMsg(offer)
	if m := next(t, answers); cluster.KindOf(m) != cluster.KindReady {
		t.Fatalf("answer to the offer: %q", cluster.KindOf(m))
	}
	nc.PublishMsg(cluster.NewFrame(subject, reply, cluster.KindGo, nil))
	return nc, answers, subject, reply
}
