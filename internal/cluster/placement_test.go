package cluster_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/cluster/frontend"
	"github.com/scratchrun/scratchrun/internal/cluster/worker"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
	"github.com/scratchrun/scratchrun/internal/httpapi"
	"github.com/scratchrun/scratchrun/internal/testenv/natsserver"
)

// The front end describes the cluster as the union of its live workers'
// runtimes, places each call on a worker that offers its runtime (the
// worker restricted to bash never gets a python3.11 call), notes which
// worker ran it, refuses a runtime no live worker offers with a 400
// naming it, and one with no live worker at all with no_workers.
func TestPlacementByRuntime(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	f := startFrontend(t, ns.URLs(), nil)
	if _, _, err := exec(f, execapi.Request{Runtime: "bash", Code: "x"}, nil); !isRefusal(err, execapi.RefusedNoWorkers) {
		t.Errorf("no worker: %v, want a no_workers refusal", err)
	}
	if err := f.Ready(context.Background()); err == nil {
		t.Error("ready with no worker")
	}
	all := newEngine("bash", "python3.11", "python3.13")
	bashOnly := newEngine("bash", "python3.11", "python3.13")
	startWorker(t, ns.URLs(), "w-all", all, nil)
	startWorker(t, ns.URLs(), "w-bash", bashOnly, func(c *worker.Config) { c.Runtimes = []string{"bash"} })
	waitWorkers(t, f, "w-all", "w-bash")
	if err := f.Ready(context.Background()); err != nil {
		t.Errorf("not ready with two workers: %v", err)
	}
	info, _ := f.Describe(context.Background())
	var names []string
	for _, rt := range info.Runtimes {
		names = append(names, rt.Name)
	}
	if strings.Join(names, ",") != "bash,python3.11,python3.13" || info.Isolation != "fake" {
		t.Errorf("described runtimes %v, isolation %q", names, info.Isolation)
	}
	ranOn := map[string]int{}
	for i := 0; i < 40; i++ {
		rt := []string{"bash", "python3.11"}[i%2]
		res, w, err := exec(f, execapi.Request{Runtime: rt, Code: "x"}, nil)
		if err != nil || res.Outcome != execapi.OutcomeSuccess {
			t.Fatalf("%s: %v %+v", rt, err, res)
		}
		ranOn[rt+"@"+w]++
	}
	if ranOn["python3.11@w-bash"] != 0 || ranOn["python3.11@w-all"] != 20 {
		t.Errorf("python3.11 calls went %v; the bash-only worker must get none", ranOn)
	}
	if ranOn["bash@w-bash"] == 0 || ranOn["bash@w-all"] == 0 {
		t.Errorf("bash calls went %v; both workers should get some", ranOn)
	}
	for _, c := range bashOnly.Calls() {
		if c.Checked.Runtime != "bash" {
			t.Errorf("the bash-only worker's engine ran a %s call", c.Checked.Runtime)
		}
	}
	_, _, err := exec(f, execapi.Request{Runtime: "cobol", Code: "x"}, nil)
	var refusal *execapi.Refusal
	if !errors.As(err, &refusal) || refusal.Reason != execapi.RefusedUnknownRuntime || httpapi.RefusalStatus(refusal) != http.StatusBadRequest ||
		!strings.Contains(refusal.Error(), `"cobol"`) {
		t.Errorf("unknown runtime: %v", err)
	}
}

// A worker's engine that refuses (its admission has no room) sends the
// call to the next worker; when every worker refuses for the queue wait,
// the caller gets the workers' refusal with the soonest Retry-After, and
// nothing ran anywhere.
func TestRefusalsGoElsewhereThenBecomeA429(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	full := newEngine("bash")
	full.Respond(func(context.Context, execapitest.Call) execapitest.Response {
		return execapitest.Response{Err: &execapi.Refusal{Reason: execapi.RefusedMemory, RetryAfter: 3 * time.Second}}
	})
	full.free.Store(0)
	roomy := newEngine("bash")
	startWorker(t, ns.URLs(), "w-full", full, nil)
	startWorker(t, ns.URLs(), "w-roomy", roomy, nil)
	f := startFrontend(t, ns.URLs(), func(c *frontend.Config) { c.QueueWait = 300 * time.Millisecond })
	waitWorkers(t, f, "w-full", "w-roomy")
	for i := 0; i < 10; i++ {
		if _, w, err := exec(f, execapi.Request{Runtime: "bash", Code: "x"}, nil); err != nil || w != "w-roomy" {
			t.Fatalf("call %d: on %q, %v", i, w, err)
		}
	}
	roomy.Respond(func(context.Context, execapitest.Call) execapitest.Response {
		return execapitest.Response{Err: &execapi.Refusal{Reason: execapi.RefusedCPU, RetryAfter: 1500 * time.Millisecond}}
	})
	start := time.Now()
	_, _, err := exec(f, execapi.Request{Runtime: "bash", Code: "x"}, nil)
	waited := time.Since(start)
	var refusal *execapi.Refusal
	if !errors.As(err, &refusal) || refusal.Reason != execapi.RefusedCPU || refusal.RetryAfter != 1500*time.Millisecond {
		t.Fatalf("every worker refusing: %v, want the cpu refusal with the soonest Retry-After", err)
	}
	if waited < 300*time.Millisecond {
		t.Errorf("refused after %s, before the queue wait", waited)
	}
	if n := len(full.Ran()) + len(roomy.Ran()) - 10; n != 0 {
		t.Errorf("%d refused calls ran", n)
	}
}

// Power of K choices: with two workers sampled, the one with free
// sandboxes is chosen over a full one, which never sees an offer while the
// other takes every call.
func TestPrefersTheEmptierWorker(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	empty, busy := newEngine("bash"), newEngine("bash")
	busy.free.Store(0)
	startWorker(t, ns.URLs(), "w-busy", busy, nil)
	startWorker(t, ns.URLs(), "w-empty", empty, nil)
	f := startFrontend(t, ns.URLs(), nil)
	waitWorkers(t, f, "w-busy", "w-empty")
	for i := 0; i < 30; i++ {
		if _, w, err := exec(f, execapi.Request{Runtime: "bash", Code: "x"}, nil); err != nil || w != "w-empty" {
			t.Fatalf("call %d went to %q (%v), want the emptier worker", i, w, err)
		}
	}
}

// A worker validates every request with its own policy, whatever the
// front end allowed: a timeout above its maximum is a validation error
// from the worker, and nothing runs.
func TestWorkerKeepsItsOwnPolicy(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	strict := execapi.DefaultPolicy()
	strict.MaxTimeout = 5 * time.Second
	eng := &engine{Service: execapitest.NewWithPolicy(strict, "bash")}
	eng.free.Store(8)
	startWorker(t, ns.URLs(), "w-strict", eng, nil)
	f := startFrontend(t, ns.URLs(), nil)
	waitWorkers(t, f, "w-strict")
	_, _, err := exec(f, execapi.Request{Runtime: "bash", Code: "x", Limits: execapi.Limits{TimeoutMS: 20000}}, nil)
	var v *execapi.ValidationError
	if !errors.As(err, &v) || v.Field != "limits.timeout_ms" {
		t.Fatalf("a timeout above the worker's maximum: %v", err)
	}
	if n := len(eng.Ran()); n != 0 {
		t.Errorf("%d calls ran past the worker's policy", n)
	}
	// Egress: this worker does not allow it, so no live worker does.
	_, _, err = exec(f, execapi.Request{Runtime: "bash", Code: "x", Network: execapi.NetworkEgress}, nil)
	if !errors.As(err, &v) || v.Field != "network" {
		t.Errorf("egress with no worker allowing it: %v", err)
	}
}

func isRefusal(err error, reason execapi.RefusalReason) bool {
	var r *execapi.Refusal
	return errors.As(err, &r) && r.Reason == reason
}
