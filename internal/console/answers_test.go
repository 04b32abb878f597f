package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
)

// scriptedErr is the one error a scripted service fails its calls with,
// changed between the cases of a test.
type scriptedErr struct {
	mu  sync.Mutex
	err error
}

func (s *scriptedErr) set(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

func (s *scriptedErr) respond(context.Context, execapitest.Call) execapitest.Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	return execapitest.Response{Err: s.err}
}

// playgroundError runs body in the playground and returns the status and
// the error document of the "error" event that ends its stream.
func playgroundError(t *testing.T, b *browser, body string) (int, json.RawMessage) {
	t.Helper()
	r := b.post("/console/api/run", body)
	events := readEvents(t, r.body)
	if r.status != http.StatusOK || len(events) == 0 || events[len(events)-1].name != "error" {
		t.Fatalf("playground: %d %s, want a stream ending in an error event", r.status, r.body)
	}
	last := events[len(events)-1]
	status, err := strconv.Atoi(string(last.data["status"]))
	if err != nil {
		t.Fatalf("playground: status %s", last.data["status"])
	}
	return status, last.data["error"]
}

// A call lost with a cluster's worker is answered in the playground as by
// the API: 502 worker_lost in the contract's one wording (before, it was a
// 500 "internal", "the run failed").
func TestPlaygroundWorkerLost(t *testing.T) {
	fail := &scriptedErr{err: &execapi.WorkerLostError{Worker: "worker-b", Why: "no word from it for 4s"}}
	tc := startConsole(t, consoleOptions{respond: fail.respond})
	b := tc.browser()
	b.signIn()
	status, doc := playgroundError(t, b, quickRun)
	var d struct{ Code, Message string }
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	if status != http.StatusBadGateway || d.Code != execapi.CodeWorkerLost || d.Message != (&execapi.WorkerLostError{}).Error() {
		t.Errorf("lost worker: %d %s, want 502 %s", status, doc, execapi.CodeWorkerLost)
	}
}

const quickRun = `{"runtime":"bash","code":"true"}`

// Every kind of error a run can end in gets the same answer from the
// playground as from POST /v1/exec on the same server: the same status and
// the same error document (code, message, reason, field, limit).
func TestPlaygroundAnswersErrorsAsTheAPI(t *testing.T) {
	fail := &scriptedErr{}
	tc := startConsole(t, consoleOptions{respond: fail.respond})
	b := tc.browser()
	b.signIn()
	refusal := func(reason execapi.RefusalReason) *execapi.Refusal {
		return &execapi.Refusal{Reason: reason, RetryAfter: 1500 * time.Millisecond}
	}
	for _, c := range []struct {
		name string
		err  error
	}{
		{"worker lost", &execapi.WorkerLostError{Worker: "worker-b", Why: "restarted"}},
		{"at capacity", refusal(execapi.RefusedAtCapacity)},
		{"queue full", refusal(execapi.RefusedQueueFull)},
		{"memory", refusal(execapi.RefusedMemory)},
		{"cpu", refusal(execapi.RefusedCPU)},
		{"key rate", &execapi.Refusal{Reason: execapi.RefusedKeyRate, RetryAfter: 20 * time.Second, Limit: 5}},
		{"key concurrency", &execapi.Refusal{Reason: execapi.RefusedKeyConcurrency, RetryAfter: time.Second, Limit: 2}},
		{"draining", &execapi.Refusal{Reason: execapi.RefusedDraining}},
		{"no workers", refusal(execapi.RefusedNoWorkers)},
		{"unknown runtime", &execapi.Refusal{Reason: execapi.RefusedUnknownRuntime, Field: "runtime", Detail: "no runtime bash here; installed: python3.13"}},
		{"wrapped refusal", fmt.Errorf("placed: %w", refusal(execapi.RefusedMemory))},
		{"invalid", &execapi.ValidationError{Field: "limits.memory_mb", Message: "more than this worker gives"}},
		{"wrapped invalid", fmt.Errorf("check: %w", &execapi.ValidationError{Field: "files[\"/x\"]", Message: "no"})},
		{"internal", errors.New("the sandbox could not be created: no space left")},
	} {
		t.Run(c.name, func(t *testing.T) {
			fail.set(c.err)
			api := b.do(http.MethodPost, "/v1/exec", "application/json", quickRun, nil)
			var apiDoc struct{ Error json.RawMessage }
			if err := json.Unmarshal([]byte(api.body), &apiDoc); err != nil || apiDoc.Error == nil {
				t.Fatalf("API: %d %s", api.status, api.body)
			}
			status, doc := playgroundError(t, b, quickRun)
			if status != api.status || !sameJSON(t, doc, apiDoc.Error) {
				t.Errorf("playground answers %d %s\nthe API answers %d %s", status, doc, api.status, apiDoc.Error)
			}
		})
	}
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		t.Fatalf("not JSON: %s, %s", a, b)
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return bytes.Equal(xs, ys)
}
