package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/engine"
	"github.com/scratchrun/scratchrun/internal/execapi"
)

func sleepBody(seconds string) string {
	return `{"runtime": "bash", "code": "sleep ` + seconds + `; echo done", "limits": {"timeout_ms": 20000}}`
}

func retryAfter(t *testing.T, a answer) int {
	t.Helper()
	v, err := strconv.Atoi(a.header.Get("Retry-After"))
	if err != nil || v < 1 {
		t.Errorf("429 with Retry-After %q: want whole seconds >= 1", a.header.Get("Retry-After"))
	}
	return v
}

// A burst larger than capacity: every request is answered, with success or
// 429 and an honest Retry-After; no more run at once than there are slots.
func TestBurstBeyondCapacity(t *testing.T) {
	sb, _ := scriptedBackend()
	ts := startServer(t, serverOptions{capacity: 2, queueWait: 300 * time.Millisecond, backend: sb})
	_, key := ts.key("burst", 1000, 100)
	const n = 12
	answers := make([]answer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], errs[i] = ts.do(context.Background(), http.MethodPost, "/v1/exec", key, strings.NewReader(sleepBody("1")), nil)
		}()
	}
	// While the burst is in flight, never more than capacity run.
	peak := 0.0
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		case <-time.After(50 * time.Millisecond):
			peak = max(peak, ts.metric("scratchrun_sandboxes_in_use"))
		}
	}
	ok, rejected := 0, 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("request %d got no answer: %v", i, errs[i])
		}
		switch answers[i].status {
		case http.StatusOK:
			ok++
			if !strings.Contains(string(answers[i].body), `"stdout":"done\n"`) {
				t.Errorf("request %d: %s", i, answers[i].body)
			}
		case http.StatusTooManyRequests:
			rejected++
			e := answers[i].errorBody(t)
			if e.Code != "at_capacity" {
				t.Errorf("429 code %q", e.Code)
			}
			// Two 1 s runs hold both slots; a retry in under a second
			// cannot succeed, and anything beyond a minute is not honest.
			if s := retryAfter(t, answers[i]); s > 60 {
				t.Errorf("Retry-After %d s for 1 s runs", s)
			}
		default:
			t.Errorf("request %d: status %d %s", i, answers[i].status, answers[i].body)
		}
	}
	t.Logf("burst of %d on 2 slots: %d ok, %d rejected, peak in use %v", n, ok, rejected, peak)
	if ok < 2 || rejected == 0 || ok+rejected != n {
		t.Errorf("%d ok and %d rejected of %d", ok, rejected, n)
	}
	if peak > 2 {
		t.Errorf("%v sandboxes in use at once with capacity 2", peak)
	}
	if c := ts.backend.Runs(); c != ok {
		t.Errorf("%d runs for %d successful requests: rejected work reached the engine", c, ok)
	}
	if got := ts.metric(`scratchrun_rejections_total{reason="at_capacity"}`) + ts.metric(`scratchrun_rejections_total{reason="queue_full"}`); int(got) != rejected {
		t.Errorf("rejections counted %v, want %d", got, rejected)
	}
	if d, u := ts.metric("scratchrun_queue_depth"), ts.metric("scratchrun_sandboxes_in_use"); d != 0 || u != 0 {
		t.Errorf("after the burst: queue depth %v, in use %v", d, u)
	}
}

// With a queue, waiting requests get the next free slot instead of a 429.
func TestQueueWaitAdmitsWhenASlotFrees(t *testing.T) {
	sb, _ := scriptedBackend()
	ts := startServer(t, serverOptions{capacity: 1, queueWait: 20 * time.Second, backend: sb})
	_, key := ts.key("q", 1000, 10)
	var wg sync.WaitGroup
	statuses := make([]int, 3)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = ts.post(key, sleepBody("0.3")).status
		}()
	}
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusOK {
			t.Errorf("request %d: status %d", i, s)
		}
	}
}

// A full queue turns requests away at once rather than letting them wait.
func TestQueueFull(t *testing.T) {
	sb, _ := scriptedBackend()
	ts := startServer(t, serverOptions{capacity: 1, queueWait: 20 * time.Second, maxQueue: 1, backend: sb})
	_, key := ts.key("q", 1000, 10)
	results := make(chan answer, 2)
	go func() { results <- ts.post(key, sleepBody("1.5")) }()
	waitFor(t, "the first run", func() bool { return ts.metric("scratchrun_sandboxes_in_use") == 1 })
	go func() { results <- ts.post(key, sleepBody("0.1")) }()
	waitFor(t, "a queued request", func() bool { return ts.metric("scratchrun_queue_depth") == 1 })
	start := time.Now()
	a := ts.post(key, sleepBody("0.1"))
	if a.status != http.StatusTooManyRequests || a.errorBody(t).Code != "at_capacity" {
		t.Fatalf("third request: %d %s", a.status, a.body)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("a full queue made the request wait %s", time.Since(start))
	}
	// The estimate counts the run in flight and the one waiting.
	if s := retryAfter(t, a); s < 1 || s > 30 {
		t.Errorf("Retry-After %d", s)
	}
	if got := ts.metric(`scratchrun_rejections_total{reason="queue_full"}`); got != 1 {
		t.Errorf("queue_full counted %v", got)
	}
	for range 2 {
		if r := <-results; r.status != http.StatusOK {
			t.Errorf("queued request: %d %s", r.status, r.body)
		}
	}
}

// A key over its rate gets 429 rate_limited with the time until its next
// run; other keys are unaffected; refused runs do not spend the rate.
func TestKeyRateLimit(t *testing.T) {
	ts := startServer(t, serverOptions{fake: scripted()})
	_, slow := ts.key("slow", 2, 4)
	_, other := ts.key("other", 100, 4)
	quick := `{"runtime": "bash", "code": "true"}`
	if a := ts.post(slow, `{"runtime": "bash", "code": "x", "return_files": ["rel"]}`); a.status != 400 {
		t.Fatalf("invalid request: %d", a.status)
	}
	for i := range 2 {
		if a := ts.post(slow, quick); a.status != http.StatusOK {
			t.Fatalf("run %d within the rate: %d %s", i, a.status, a.body)
		}
	}
	ran := len(ts.fake.Ran())
	a := ts.post(slow, quick)
	if a.status != http.StatusTooManyRequests || a.errorBody(t).Code != execapi.CodeRateLimited {
		t.Fatalf("run over the rate: %d %s", a.status, a.body)
	}
	// 2/min refills one run every 30 s.
	if s := retryAfter(t, a); s < 25 || s > 30 {
		t.Errorf("Retry-After %d s for a 2/min key, want about 30", s)
	}
	if len(ts.fake.Ran()) != ran {
		t.Error("a rate-limited request reached the engine")
	}
	if a := ts.post(other, quick); a.status != http.StatusOK {
		t.Errorf("another key: %d", a.status)
	}
}

// A key over its concurrency gets 429 concurrency_limited while its own run
// is in flight; another key still runs.
func TestKeyConcurrencyLimit(t *testing.T) {
	ts := startServer(t, serverOptions{fake: scripted()})
	_, single := ts.key("single", 100, 1)
	_, other := ts.key("other", 100, 4)
	first := make(chan answer, 1)
	go func() { first <- ts.post(single, sleepBody("2")) }()
	waitFor(t, "the first run", func() bool { return ts.metric("scratchrun_sandboxes_in_use") == 1 })
	a := ts.post(single, sleepBody("0"))
	if a.status != http.StatusTooManyRequests || a.errorBody(t).Code != execapi.CodeConcurrencyLimit {
		t.Fatalf("second concurrent request: %d %s", a.status, a.body)
	}
	if s := retryAfter(t, a); s > 25 {
		t.Errorf("Retry-After %d s while the key's run has at most 20 s left", s)
	}
	if a := ts.post(other, sleepBody("0")); a.status != http.StatusOK {
		t.Errorf("another key while the first is at its limit: %d %s", a.status, a.body)
	}
	if r := <-first; r.status != http.StatusOK {
		t.Errorf("first run: %d", r.status)
	}
	if a := ts.post(single, sleepBody("0")); a.status != http.StatusOK {
		t.Errorf("after its run ended: %d %s", a.status, a.body)
	}
}

// One key flooding the queue does not starve another: the other key's
// request is served in the next round, not after the whole flood.
func TestFairnessAcrossKeys(t *testing.T) {
	sb, _ := scriptedBackend()
	ts := startServer(t, serverOptions{capacity: 1, queueWait: 60 * time.Second, maxQueue: 20, backend: sb})
	_, flood := ts.key("flood", 1000, 20)
	_, polite := ts.key("polite", 1000, 20)
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	send := func(who, key, seconds string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := ts.post(key, sleepBody(seconds))
			mu.Lock()
			order = append(order, fmt.Sprintf("%s:%d", who, a.status))
			mu.Unlock()
		}()
	}
	send("flood", flood, "2")
	waitFor(t, "the first run", func() bool { return ts.metric("scratchrun_sandboxes_in_use") == 1 })
	for i := range 5 {
		send("flood", flood, "0.2")
		waitFor(t, "flood queued", func() bool { return ts.metric("scratchrun_queue_depth") == float64(i+1) })
	}
	send("polite", polite, "0.2")
	waitFor(t, "polite queued", func() bool { return ts.metric("scratchrun_queue_depth") == 6 })
	wg.Wait()
	t.Logf("completion order: %v", order)
	pos := -1
	for i, o := range order {
		if !strings.HasSuffix(o, ":200") {
			t.Errorf("%s", o)
		}
		if strings.HasPrefix(o, "polite") {
			pos = i
		}
	}
	// Served round-robin: flood's running request, flood's next, then polite.
	if pos < 0 || pos > 2 {
		t.Errorf("polite finished at position %d of %d behind a flood", pos, len(order))
	}
}

// Calls beyond the engine's memory budget wait and then get 429 with
// reason memory and Retry-After, in the API's error document, and the
// refusal is counted by its reason; the MCP tool says the same words.
func TestMemoryBudgetAnswers429(t *testing.T) {
	sb, release := scriptedBackend()
	defer release()
	sb.Steps[0].Memory = 80 << 20 // what each sandbox uses
	ts := startServerWith(t, serverOptions{capacity: 10, queueWait: 300 * time.Millisecond, backend: sb}, func(c *engine.Config) {
		c.Admission.MemoryBudget, c.Admission.CallFloor = 100<<20, 30<<20
	})
	held := make(chan answer, 1)
	go func() { held <- ts.post("", holdBody) }()
	waitFor(t, "the first run", func() bool { return ts.metric("scratchrun_sandboxes_in_use") == 1 })
	a := ts.post("", quickBody)
	words := refusedAs(t, a, http.StatusTooManyRequests, execapi.RefusedMemory, 0)
	if e := a.errorBody(t); e.Code != execapi.CodeAtCapacity || retryAfter(t, a) < 1 || !strings.Contains(words, "memory") {
		t.Errorf("refused for memory: %+v", e)
	}
	if got := ts.metric(`scratchrun_rejections_total{reason="memory"}`); got != 1 {
		t.Errorf("memory rejections counted %v", got)
	}
	if used, budget := ts.metric("scratchrun_admission_memory_used_bytes"), ts.metric("scratchrun_admission_memory_budget_bytes"); used != 80<<20 || budget != 100<<20 {
		t.Errorf("metrics: %v used of %v", used, budget)
	}
	release()
	if r := <-held; r.status != http.StatusOK {
		t.Errorf("the held run: %d %s", r.status, r.body)
	}
	if a := ts.post("", quickBody); a.status != http.StatusOK {
		t.Errorf("after the memory freed: %d %s", a.status, a.body)
	}
}
