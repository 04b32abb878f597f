package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
	"github.com/scratchrun/scratchrun/internal/mcpserver"
	"github.com/scratchrun/scratchrun/internal/store"
	"github.com/scratchrun/scratchrun/internal/testenv/postgres"
)

// Front ends that share one key database (PostgreSQL here, as `serve --db
// postgres://...` on several machines) hold each key to its limits
// together: two servers, each with its own gate and engine (scripted), one
// database on a real PostgreSQL server.

// concurrencyMeter is a scripted service's run that counts the runs in
// flight across every service it is given to, and the most at once.
type concurrencyMeter struct {
	now, most atomic.Int64
	ran       atomic.Int64
}

func (c *concurrencyMeter) service() *execapitest.Service {
	fake := execapitest.New("bash")
	fake.Respond(func(context.Context, execapitest.Call) execapitest.Response {
		n := c.now.Add(1)
		for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
		}
		time.Sleep(30 * time.Millisecond)
		c.now.Add(-1)
		c.ran.Add(1)
		return execapitest.Response{Result: execapitest.Success("ok\n")}
	})
	return fake
}

// A key with concurrency 2 hammered through both front ends never runs more
// than 2 at once, though each front end alone would allow 2 (4 together,
// as each counted only its own before the count moved into the store).
func TestKeyConcurrencyHoldsAcrossFrontEnds(t *testing.T) {
	t.Run("postgres", func(t *testing.T) { keyConcurrencyAcrossFrontEnds(t, postgres.Shared(t).NewDatabase(t)) })
	// Several servers on one machine may share a SQLite file.
	t.Run("sqlite", func(t *testing.T) { keyConcurrencyAcrossFrontEnds(t, filepath.Join(t.TempDir(), "shared.db")) })
}

func keyConcurrencyAcrossFrontEnds(t *testing.T, db string) {
	var meter concurrencyMeter
	a := startServer(t, serverOptions{capacity: 4, queueWait: 10 * time.Second, fake: meter.service(), db: db})
	b := startServer(t, serverOptions{capacity: 4, queueWait: 10 * time.Second, fake: meter.service(), db: db})
	_, key := a.key("hammer", 1<<20, 2)
	const callers, calls = 12, 5
	var refused atomic.Int64
	var served [2]atomic.Int64
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts := []*testServer{a, b}[i%2]
			for range calls {
				for {
					ans := ts.post(key, quickBody)
					if ans.status == http.StatusOK {
						served[i%2].Add(1)
						break
					}
					if ans.status != http.StatusTooManyRequests || ans.errorBody(t).Reason != string(execapi.RefusedKeyConcurrency) {
						t.Errorf("through front end %d: %d %s", i%2, ans.status, ans.body)
						return
					}
					refused.Add(1)
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d calls through two front ends: at most %d at once, %d refusals for concurrency; served %d and %d",
		callers*calls, meter.most.Load(), refused.Load(), served[0].Load(), served[1].Load())
	// That 2 ran at once shows in the refusals (each at the key's limit),
	// not surely in the fake's own timing of the runs, which a loaded
	// machine can keep from overlapping.
	if most := meter.most.Load(); most > 2 || refused.Load() == 0 {
		t.Errorf("a concurrency-2 key ran %d at once across two front ends, %d refused at its limit", most, refused.Load())
	}
	if meter.ran.Load() != callers*calls || served[0].Load() == 0 || served[1].Load() == 0 {
		t.Errorf("ran %d of %d calls; each front end must serve some", meter.ran.Load(), callers*calls)
	}
	// Every run is recorded once, as the local machine's.
	rows, err := a.keys.ListUsage(context.Background(), store.UsageFilter{})
	if err != nil || len(rows) != callers*calls {
		t.Fatalf("%d usage rows for %d runs, %v", len(rows), callers*calls, err)
	}
	for _, u := range rows {
		if u.Worker != store.LocalWorker || u.Outcome != "success" {
			t.Fatalf("usage row %+v", u)
		}
	}
}

// A key's rate is one bucket across front ends: a 3/min key gets 3 runs in
// all, however its calls are spread.
func TestKeyRateHoldsAcrossFrontEnds(t *testing.T) {
	db := postgres.Shared(t).NewDatabase(t)
	a := startServer(t, serverOptions{fake: scripted(), db: db})
	b := startServer(t, serverOptions{fake: scripted(), db: db})
	_, key := a.key("three", 3, 10)
	for i, ts := range []*testServer{a, b, a} {
		if ans := ts.post(key, quickBody); ans.status != http.StatusOK {
			t.Fatalf("run %d within the rate: %d %s", i, ans.status, ans.body)
		}
	}
	refusedAs(t, b.post(key, quickBody), http.StatusTooManyRequests, execapi.RefusedKeyRate, 3)
}

// A key revoked through one front end is refused by the other on its very
// next request, REST and MCP alike (an MCP session opened before the revoke
// included): every call checks the key in the shared store.
func TestRevokeReachesEveryFrontEnd(t *testing.T) {
	db := postgres.Shared(t).NewDatabase(t)
	a := startServer(t, serverOptions{fake: scripted(), db: db})
	b := startServer(t, serverOptions{fake: scripted(), db: db, mcp: true})
	k, key := a.key("doomed", 100, 4)
	if ans := b.post(key, quickBody); ans.status != http.StatusOK {
		t.Fatalf("before the revoke: %d %s", ans.status, ans.body)
	}
	cs := b.mcpSession(key)
	if text, isErr := toolCall(t, cs, "true"); isErr {
		t.Fatalf("MCP before the revoke: %s", text)
	}
	revoked := time.Now()
	if _, err := a.keys.Revoke(context.Background(), k.ID); err != nil {
		t.Fatal(err)
	}
	ans := b.post(key, quickBody)
	t.Logf("first request to the other front end, %s after the revoke: %d", time.Since(revoked).Round(time.Microsecond), ans.status)
	if ans.status != http.StatusUnauthorized {
		t.Fatalf("the other front end after the revoke: %d %s", ans.status, ans.body)
	}
	// The session's tool call is refused too (its HTTP request is, by the
	// key check in front of /mcp; the gate checks again on every call).
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: mcpserver.ToolName, Arguments: map[string]any{"runtime": "bash", "code": "true"}})
	if err == nil && !res.IsError {
		t.Error("an MCP session opened before the revoke still runs calls")
	}
	if got := len(b.fake.Ran()); got != 2 {
		t.Errorf("the other front end ran %d calls, want the 2 before the revoke", got)
	}
}

// A run's worker, as an Executor that forwards calls names it on the
// result (execapi.Result.Worker), is recorded with its usage row; the
// local engine names none and its runs are "local".
func TestUsageRecordsTheWorker(t *testing.T) {
	fake := execapitest.New("bash")
	fake.Respond(func(ctx context.Context, c execapitest.Call) execapitest.Response {
		res := execapitest.Success("")
		if c.Checked.Code == "remote" {
			res.Worker = "worker-7"
		}
		return execapitest.Response{Result: res}
	})
	ts := startServer(t, serverOptions{fake: fake})
	_, key := ts.key("w", 100, 4)
	for _, code := range []string{"remote", "here"} {
		body, _ := json.Marshal(map[string]string{"runtime": "bash", "code": code})
		if ans := ts.post(key, string(body)); ans.status != http.StatusOK {
			t.Fatalf("%s: %d %s", code, ans.status, ans.body)
		}
	}
	rows, _ := ts.keys.ListUsage(context.Background(), store.UsageFilter{})
	if len(rows) != 2 || rows[0].Worker != "worker-7" || rows[1].Worker != store.LocalWorker {
		t.Errorf("usage rows %+v; want worker-7, then local", rows)
	}
}
