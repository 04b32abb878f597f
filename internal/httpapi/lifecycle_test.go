package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/engine"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/store"
)

// Draining: accepted runs finish with 200, new requests get 503 with the
// error document, readiness fails, and then the listener closes.
func TestDrainFinishesRunsAndRefusesNewOnes(t *testing.T) {
	ts := startServer(t, serverOptions{capacity: 2, fake: scripted()})
	_, key := ts.key("alice", 100, 4)
	long := make(chan answer, 1)
	go func() { long <- ts.post(key, sleepBody("2")) }()
	waitFor(t, "the run", func() bool { return ts.metric("scratchrun_sandboxes_in_use") == 1 })
	ts.cancel()
	waitFor(t, "draining", func() bool { return ts.srv.drain.isDraining() })

	a := ts.post(key, sleepBody("0"))
	if a.status != http.StatusServiceUnavailable || a.errorBody(t).Code != execapi.CodeDraining {
		t.Errorf("request while draining: %d %s", a.status, a.body)
	}
	r, err := ts.do(context.Background(), http.MethodGet, "/readyz", "", nil, nil)
	if err != nil || r.status != http.StatusServiceUnavailable {
		t.Errorf("readyz while draining: %d %v", r.status, err)
	}
	h, err := ts.do(context.Background(), http.MethodGet, "/healthz", "", nil, nil)
	if err != nil || h.status != http.StatusOK {
		t.Errorf("healthz while draining: %d %v", h.status, err)
	}
	res := <-long
	if res.status != http.StatusOK || !strings.Contains(string(res.body), `"stdout":"done\n"`) {
		t.Errorf("run in flight: %d %s", res.status, res.body)
	}
	if err := ts.stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	_, err = ts.do(context.Background(), http.MethodGet, "/healthz", "", nil, nil)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("after the drain: %v, want connection refused", err)
	}
}

// Abort cuts a drain short: the run is cancelled and its sandbox killed.
func TestAbortCancelsRuns(t *testing.T) {
	ts := startServer(t, serverOptions{capacity: 1})
	_, key := ts.key("alice", 100, 4)
	aborted := make(chan answer, 1)
	go func() {
		a, _ := ts.do(context.Background(), http.MethodPost, "/v1/exec", key, strings.NewReader(sleepBody("20")), nil)
		aborted <- a
	}()
	waitFor(t, "the run", func() bool { return ts.metric("scratchrun_sandboxes_in_use") == 1 })
	start := time.Now()
	ts.cancel()
	waitFor(t, "draining", func() bool { return ts.srv.drain.isDraining() })
	ts.srv.Abort()
	if err := ts.stop(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("abort took %s with a 20 s run in flight", d)
	}
	if a := <-aborted; a.status != http.StatusServiceUnavailable || a.errorBody(t).Code != execapi.CodeDraining {
		t.Errorf("the aborted run's answer: %d %s", a.status, a.body)
	}
}

// A client that goes away mid-run gets its sandbox killed at once; the run
// is accounted as cancelled. The leak check runs in startServer's cleanup.
func TestClientDisconnectKillsSandbox(t *testing.T) {
	ts := startServer(t, serverOptions{capacity: 1})
	k, key := ts.key("alice", 100, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := ts.do(ctx, http.MethodPost, "/v1/exec", key, strings.NewReader(sleepBody("25")), nil)
		done <- err
	}()
	waitFor(t, "the run", func() bool { return ts.metric("scratchrun_sandboxes_in_use") == 1 })
	time.Sleep(200 * time.Millisecond) // let the program start
	start := time.Now()
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled request succeeded")
	}
	waitFor(t, "the slot to free", func() bool { return ts.metric("scratchrun_sandboxes_in_use") == 0 })
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the sandbox outlived its client by %s", d)
	}
	var rows []store.Usage
	waitFor(t, "the usage row", func() bool {
		rows, _ = ts.keys.ListUsage(context.Background(), store.UsageFilter{KeyIDs: []string{k.ID}})
		return len(rows) == 1
	})
	if rows[0].Outcome != "cancelled" || rows[0].ExitCode != -1 {
		t.Errorf("usage of the cancelled run: %+v", rows[0])
	}
	if got := ts.metric(`scratchrun_runs_total{outcome="cancelled",runtime="bash"}`); got != 1 {
		t.Errorf("cancelled runs counted %v", got)
	}
	// The slot is really free: the next run goes straight in.
	if a := ts.post(key, sleepBody("0")); a.status != http.StatusOK {
		t.Errorf("next run: %d %s", a.status, a.body)
	}
}

// Revoking a key (from another handle on the database, as `scratchrun keys
// revoke` does) refuses its very next request.
func TestRevokeTakesEffectImmediately(t *testing.T) {
	ts := startServer(t, serverOptions{fake: scripted()})
	k, key := ts.key("alice", 100, 4)
	_, other := ts.key("bob", 100, 4)
	quick := `{"runtime": "bash", "code": "true"}`
	if a := ts.post(key, quick); a.status != http.StatusOK {
		t.Fatalf("before revoke: %d %s", a.status, a.body)
	}
	cli, err := store.Open(context.Background(), ts.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Revoke(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	ran := len(ts.fake.Ran())
	a := ts.post(key, quick)
	if a.status != http.StatusUnauthorized || a.errorBody(t).Code != CodeUnauthorized {
		t.Errorf("after revoke: %d %s", a.status, a.body)
	}
	if len(ts.fake.Ran()) != ran {
		t.Error("a revoked key's request reached the engine")
	}
	if a := ts.post(other, quick); a.status != http.StatusOK {
		t.Errorf("another key after the revoke: %d", a.status)
	}
	// A run already admitted under a key revoked meanwhile is refused by
	// the gate too (MCP sessions hold a key across requests).
	ctx := execapi.WithCaller(context.Background(), k.ID)
	if _, err := ts.srv.Service().Exec(ctx, execapi.Request{Runtime: "bash", Code: "true"}, nil); !errors.Is(err, errUnauthorized) {
		t.Errorf("gate with a revoked caller: %v", err)
	}
}

// Every run is one usage row with its key, runtime, exit code, outcome and
// bytes; refused requests leave none.
func TestUsageRowsMatchRuns(t *testing.T) {
	ts := startServer(t, serverOptions{})
	ka, alice := ts.key("alice", 100, 4)
	kb, bob := ts.key("bob", 100, 4)
	type run struct {
		key, body         string
		keyID, runtime    string
		exit              int
		outcome           string
		bytesIn, bytesOut int64
	}
	runs := []run{
		{alice, `{"runtime": "bash", "code": "echo hi; exit 3"}`, ka.ID, "bash", 3, "nonzero_exit", int64(len("echo hi; exit 3")), 3},
		{alice, `{"runtime": "python3.13", "code": "print(open('/tmp/f').read())", "files": {"/tmp/f": "12345"}, "env": {"A": "bc"}}`,
			ka.ID, "python3.13", 0, "success", int64(len("print(open('/tmp/f').read())") + 5 + 3), 6},
		{bob, `{"runtime": "bash", "code": "echo e >&2; head -c 1000 /dev/zero > /tmp/z", "return_files": ["/tmp/z"]}`,
			kb.ID, "bash", 0, "success", int64(len("echo e >&2; head -c 1000 /dev/zero > /tmp/z")), 2 + 1000},
		{bob, `{"runtime": "bash", "code": "sleep 10", "limits": {"timeout_ms": 1000}}`, kb.ID, "bash", 124, "timeout", 8, 0},
	}
	for i, r := range runs {
		if a := ts.post(r.key, r.body); a.status != http.StatusOK {
			t.Fatalf("run %d: %d %s", i, a.status, a.body)
		}
	}
	// Refused: invalid, unauthenticated, unknown runtime.
	ts.post(alice, `{"runtime": "bash"}`)
	ts.post("", `{"runtime": "bash", "code": "true"}`)
	ts.post(bob, `{"runtime": "cobol", "code": "x"}`)

	rows, err := ts.keys.ListUsage(context.Background(), store.UsageFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(runs) {
		t.Fatalf("%d usage rows for %d runs: %+v", len(rows), len(runs), rows)
	}
	for i, r := range runs {
		u := rows[i]
		if u.KeyID != r.keyID || u.Runtime != r.runtime || u.ExitCode != r.exit || u.Outcome != r.outcome || u.BytesIn != r.bytesIn || u.BytesOut != r.bytesOut {
			t.Errorf("row %d = %+v\nwant key %s runtime %s exit %d outcome %s in %d out %d", i, u, r.keyID, r.runtime, r.exit, r.outcome, r.bytesIn, r.bytesOut)
		}
		if u.Duration <= 0 || u.Duration > time.Minute || time.Since(u.Started) > 5*time.Minute {
			t.Errorf("row %d: duration %s started %s", i, u.Duration, u.Started)
		}
	}
	sums, _ := ts.keys.SummarizeUsage(context.Background(), store.UsageFilter{})
	if len(sums) != 2 || sums[0].Runs+sums[1].Runs != 4 {
		t.Errorf("summaries %+v", sums)
	}
}

// With no key ever created the server is open (serve allows that only on
// loopback); the first key closes it, and a revoked last key keeps it closed.
func TestOpenUntilTheFirstKey(t *testing.T) {
	ts := startServer(t, serverOptions{fake: scripted()})
	quick := `{"runtime": "bash", "code": "echo open"}`
	if a := ts.post("", quick); a.status != http.StatusOK {
		t.Fatalf("open server: %d %s", a.status, a.body)
	}
	rows, _ := ts.keys.ListUsage(context.Background(), store.UsageFilter{})
	if len(rows) != 1 || rows[0].KeyID != "" {
		t.Errorf("usage in open mode: %+v", rows)
	}
	_, key := ts.key("first", 100, 4)
	if a := ts.post("", quick); a.status != http.StatusUnauthorized {
		t.Errorf("without a key once one exists: %d", a.status)
	}
	if a := ts.post(key, quick); a.status != http.StatusOK {
		t.Errorf("with the key: %d", a.status)
	}
	ts.keys.Revoke(context.Background(), "first")
	if a := ts.post("", quick); a.status != http.StatusUnauthorized {
		t.Errorf("after revoking the only key: %d (the server fell open)", a.status)
	}
}

// /healthz, /readyz (which proves a sandbox starts) and /metrics with the
// series the issue names.
func TestHealthReadyMetrics(t *testing.T) {
	ts := startServer(t, serverOptions{})
	created := backend.created.Load()
	for _, path := range []string{"/healthz", "/readyz"} {
		a, err := ts.do(context.Background(), http.MethodGet, path, "", nil, nil)
		var body map[string]string
		if err != nil || a.status != http.StatusOK || json.Unmarshal(a.body, &body) != nil {
			t.Errorf("%s: %d %s %v", path, a.status, a.body, err)
		}
	}
	if backend.created.Load() != created+1 {
		t.Errorf("readyz created %d sandboxes, want 1 (the probe)", backend.created.Load()-created)
	}
	// A second look within the window does not start another.
	ts.do(context.Background(), http.MethodGet, "/readyz", "", nil, nil)
	if backend.created.Load() != created+1 {
		t.Error("readyz probed again at once")
	}
	ts.post("", `{"runtime": "bash", "code": "true"}`)
	a, _ := ts.do(context.Background(), http.MethodGet, "/metrics", "", nil, nil)
	for _, want := range []string{
		`scratchrun_runs_total{outcome="success",runtime="bash"} 1`,
		`scratchrun_run_duration_seconds_bucket{runtime="bash"`,
		`scratchrun_http_request_duration_seconds_bucket{code="200",route="/v1/exec"`,
		`scratchrun_queue_wait_seconds_count 1`,
		`scratchrun_queue_depth 0`,
		`scratchrun_sandboxes_in_use 0`,
		`scratchrun_capacity 2`,
		`scratchrun_admission_free `,
		`scratchrun_admission_memory_budget_bytes 0`,
		`scratchrun_admission_cpu_threshold 0`,
		`scratchrun_rejections_total{reason="memory"} 0`,
		`scratchrun_rejections_total{reason="cpu"} 0`,
		`scratchrun_pool_size{network="none",runtime="python3.13",variant=""} 0`,
		`scratchrun_rejections_total{reason="key_rate"} 0`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(a.body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// With a warm pool in the engine, /metrics reports its ready sandboxes.
func TestPoolSizeMetric(t *testing.T) {
	ts := startServerWith(t, serverOptions{}, func(c *engine.Config) {
		c.Pool = engine.PoolConfig{Floor: 1, Max: 1, IdleAfter: time.Hour, MaxAge: time.Hour, Runtimes: []string{"python3.13"}, Networks: []string{"none"}}
	})
	if !ts.eng.WaitWarm(context.Background(), time.Minute) {
		t.Fatal("the pool did not warm up")
	}
	a, _ := ts.do(context.Background(), http.MethodGet, "/metrics", "", nil, nil)
	ready := 0.0
	for _, line := range strings.Split(string(a.body), "\n") {
		if strings.HasPrefix(line, `scratchrun_pool_size{network="none",runtime="python3.13"`) {
			var v float64
			fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
			ready += v
		}
	}
	if ready < 1 {
		t.Errorf("pool size %v with a floor of 1:\n%s", ready, a.body)
	}
}

// Draining also waits for runs that no HTTP request is waiting on (an MCP
// tool call can outlive its request): Serve returns only after they end.
func TestDrainWaitsForRunsOutsideHTTP(t *testing.T) {
	ts := startServer(t, serverOptions{fake: scripted()})
	type outcome struct {
		res execapi.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := ts.srv.Service().Exec(context.Background(), execapi.Request{Runtime: "bash", Code: "sleep 1.5; echo ok"}, nil)
		done <- outcome{res, err}
	}()
	waitFor(t, "the run", func() bool { return ts.metric("scratchrun_sandboxes_in_use") == 1 })
	if err := ts.stop(); err != nil {
		t.Fatal(err)
	}
	// The service records a run as it ends, before the gate lets the drain
	// go on: when Serve has returned, the run must be recorded. (Comparing
	// the time the caller's goroutine read after Exec with the time Serve
	// returned failed under load: that goroutine may run later.)
	if n := len(ts.fake.Calls()); n != 1 {
		t.Errorf("Serve returned before the run ended (%d runs ended)", n)
	}
	o := <-done
	if o.err != nil || o.res.Stdout != "ok\n" {
		t.Errorf("run during the drain: %+v %v", o.res, o.err)
	}
}

// A run's outcome in usage rows and metrics is the engine's, not a reading
// of its note: a program that exits 124, or is killed by SIGKILL, by itself
// is a nonzero exit even when its note happens to hold the words
// "timeout" or "memory limit" (here, in the names of return files that do
// not exist). Before, the gate searched the note for them and counted these
// runs as timeouts and memory-limit kills.
func TestOutcomeIsTheEnginesNotTheNotesWords(t *testing.T) {
	ts := startServer(t, serverOptions{})
	k, key := ts.key("alice", 100, 4)
	for _, body := range []string{
		`{"runtime": "bash", "code": "exit 124", "return_files": ["/tmp/timeout"]}`,
		`{"runtime": "bash", "code": "kill -9 $$", "return_files": ["/tmp/memory limit"]}`,
	} {
		a := ts.post(key, body)
		var res execapi.Result
		if a.status != http.StatusOK || json.Unmarshal(a.body, &res) != nil {
			t.Fatalf("%s: %d %s", body, a.status, a.body)
		}
		if res.ExitCode != 124 && res.ExitCode != 137 {
			t.Fatalf("%s: exit %d, want the program's own 124 or 137", body, res.ExitCode)
		}
	}
	rows, err := ts.keys.ListUsage(context.Background(), store.UsageFilter{KeyIDs: []string{k.ID}})
	if err != nil || len(rows) != 2 {
		t.Fatalf("usage rows %+v (%v)", rows, err)
	}
	for _, u := range rows {
		if u.Outcome != "nonzero_exit" {
			t.Errorf("exit %d counted as %q, want nonzero_exit", u.ExitCode, u.Outcome)
		}
	}
	for _, o := range []string{"timeout", "memory_limit"} {
		if got := ts.metric(`scratchrun_runs_total{outcome="` + o + `",runtime="bash"}`); got != 0 {
			t.Errorf("%v runs counted as %s", got, o)
		}
	}
	if got := ts.metric(`scratchrun_runs_total{outcome="nonzero_exit",runtime="bash"}`); got != 2 {
		t.Errorf("%v runs counted as nonzero_exit, want 2", got)
	}
}
