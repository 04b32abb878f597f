package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/store"
	"github.com/scratchrun/scratchrun/internal/testenv"
	"github.com/scratchrun/scratchrun/internal/testenv/postgres"
)

// The cluster's behaviour on real processes, in one cluster that each
// step leaves as it found it (a killed worker restarted, a killed NATS
// node back), in the order of the list.
func TestCluster(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	postgres.Shared(t) // its processes are the suite's, not the sandboxes'
	before := snapshot()
	c := startCluster(t)
	loadKey, load := c.key("load", 1_000_000, 64)

	t.Run("permissions", func(t *testing.T) { clusterPermissions(t, c) })
	t.Run("300 calls", func(t *testing.T) { cluster300Calls(t, c, loadKey, load) })
	t.Run("runtimes", func(t *testing.T) { clusterRuntimes(t, c, load) })
	t.Run("MCP progress and cancel", func(t *testing.T) { clusterMCP(t, c, load) })
	t.Run("streaming", func(t *testing.T) { clusterStream(t, c) })
	t.Run("burst at 4x capacity", func(t *testing.T) { clusterBurst(t, c, load) })
	t.Run("key concurrency across front ends", func(t *testing.T) { clusterKeyLimits(t, c) })
	t.Run("kill -9 of a worker", func(t *testing.T) { clusterKilledWorker(t, c, loadKey, load) })
	t.Run("kill of a NATS node", func(t *testing.T) { clusterKilledNATSNode(t, c, load) })
	t.Run("SIGTERM of a worker", func(t *testing.T) { clusterDrainedWorker(t, c, loadKey, load) })
	c.stopAll(t)
	c.checkClean(t, before)
	if t.Failed() {
		t.Logf("logs:\n%s", c.logs())
	}
}

// The documented permissions hold: a worker cannot hear another worker's
// calls nor publish its registration.
func clusterPermissions(t *testing.T, c *testCluster) {
	violations := make(chan error, 4)
	nc, err := nats.Connect(strings.Join(c.nats.URLs(), ","), nats.RootCAs(c.ca), nats.UserInfo("worker-1", c.secrets["worker-1"]),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for _, try := range []func() error{
		func() error { _, err := nc.SubscribeSync(cluster.WorkerCalls("worker-2")); return err },
		func() error { return nc.Publish(cluster.RegistrySubject("worker-2"), []byte(`{"id":"worker-2"}`)) },
		func() error { return nc.Publish(cluster.CallSubject("worker-2", "x"), nil) },
	} {
		if err := try(); err != nil {
			t.Fatal(err)
		}
		nc.Flush()
		select {
		case err := <-violations:
			if !strings.Contains(err.Error(), "ermissions violation") {
				t.Errorf("want a permissions violation, got %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("the server let worker-1 do what only worker-2 (or a front end) may")
		}
	}
	if _, err := nats.Connect(c.nats.URL(0), nats.RootCAs(c.ca), nats.UserInfo("worker-1", "wrong")); err == nil {
		t.Error("a wrong password was let in")
	}
}

// 300 calls through both front ends, spread over the workers, each
// answered once with its own output; the usage rows match them, each with
// the worker that ran it; nothing of a call is on the NATS servers' disks.
// Ten clients share six sandboxes (four for python3.11), so on a loaded
// machine a call may wait past the queue wait: the clients do what an
// agent does with a 429, wait its Retry-After and send it again (a
// refused call ran nowhere, so the usage rows still count each call once).
func cluster300Calls(t *testing.T, c *testCluster, k store.Key, key string) {
	const n = 300
	marker := "sr-secret-" + randomSecret(t)
	var wg sync.WaitGroup
	jobs := make(chan int)
	answers := make([]answer, n)
	var refused atomic.Int64
	for g := 0; g < 10; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				req := execapi.Request{Runtime: "bash", Code: `echo "$N"`, Env: map[string]string{"N": strconv.Itoa(i), "SECRET": marker}}
				if i%3 == 0 {
					req = execapi.Request{Runtime: "python3.11", Code: `import os; print(os.environ["N"])`, Env: req.Env}
				}
				body, _ := json.Marshal(req)
				for try := 0; ; try++ {
					answers[i] = post(c.fronts[(i+try)%2].url, key, string(body))
					wait, err := strconv.Atoi(answers[i].retryAfter)
					if answers[i].status != http.StatusTooManyRequests || err != nil || try == 4 {
						break
					}
					refused.Add(1)
					time.Sleep(time.Duration(wait) * time.Second)
				}
			}
		}()
	}
	since := time.Now()
	for i := 0; i < n; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	t.Logf("%d calls in %s; %d answers were 429 (sent again after their Retry-After)", n, time.Since(since).Round(10*time.Millisecond), refused.Load())
	for i, a := range answers {
		var res execapi.Result
		if a.status != http.StatusOK || json.Unmarshal([]byte(a.body), &res) != nil || res.Stdout != strconv.Itoa(i)+"\n" {
			t.Fatalf("call %d: %d %s", i, a.status, a.body)
		}
	}
	rows, err := c.keys.ListUsage(context.Background(), store.UsageFilter{KeyIDs: []string{k.ID}, Since: since})
	if err != nil {
		t.Fatal(err)
	}
	byWorker := map[string]int{}
	for _, u := range rows {
		byWorker[u.Worker+"/"+u.Runtime]++
		if u.Outcome != "success" {
			t.Errorf("usage row %+v", u)
		}
	}
	t.Logf("runs by worker and runtime: %v", byWorker)
	if len(rows) != n {
		t.Errorf("%d usage rows for %d calls", len(rows), n)
	}
	for _, w := range []string{"worker-1", "worker-2", "worker-3"} {
		if byWorker[w+"/bash"] == 0 {
			t.Errorf("%s ran no call", w)
		}
	}
	if byWorker["worker-3/python3.11"] != 0 || byWorker["worker-1/python3.11"]+byWorker["worker-2/python3.11"] != n/3 {
		t.Errorf("python3.11 calls went %v; worker-3 offers none", byWorker)
	}
	// Calls and their env travel on core NATS only: nothing of them is on
	// a server's disk (the registry bucket is in memory too).
	filepath.WalkDir(c.nats.StoreDir(), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if data, _ := os.ReadFile(path); strings.Contains(string(data), marker) {
			t.Errorf("%s holds a call's env value", path)
		}
		return nil
	})
}

// A runtime no live worker offers (node20 is installed, but no worker
// offers it) is a 400 naming it; the union of the workers' runtimes is
// what /v1/runtimes lists.
func clusterRuntimes(t *testing.T, c *testCluster, key string) {
	a := post(c.fronts[1].url, key, `{"runtime": "node20", "code": "console.log(1)"}`)
	if a.status != http.StatusBadRequest || !strings.Contains(a.body, `\"node20\"`) || !strings.Contains(a.body, `"reason":"unknown_runtime"`) {
		t.Errorf("a runtime no worker offers: %d %s", a.status, a.body)
	}
	_, body, err := httpCall(http.MethodGet, c.fronts[0].url+"/v1/runtimes", key, "")
	var info execapi.Info
	if err != nil || json.Unmarshal([]byte(body), &info) != nil {
		t.Fatalf("/v1/runtimes: %v %s", err, body)
	}
	var names []string
	for _, rt := range info.Runtimes {
		names = append(names, rt.Name)
	}
	if strings.Join(names, ",") != "bash,python3.11,python3.13" || info.Isolation != "namespaces" {
		t.Errorf("/v1/runtimes: %v %q", names, info.Isolation)
	}
}

// A burst at four times the cluster's capacity: every request answered,
// a 200 or a 429 with Retry-After, none lost or hung.
func clusterBurst(t *testing.T, c *testCluster, key string) {
	const n = 4 * 3 * workerCapacity
	answers, wait := c.postAtOnce(key, `{"runtime": "bash", "code": "sleep 1.5; echo done"}`, n)
	wait()
	counts := map[int]int{}
	for _, a := range answers {
		counts[a.status]++
		switch a.status {
		case http.StatusOK:
			if !strings.Contains(a.body, `"stdout":"done\n"`) {
				t.Errorf("200 without the output: %s", a.body)
			}
		case http.StatusTooManyRequests:
			if s, err := strconv.Atoi(a.retryAfter); err != nil || s < 1 {
				t.Errorf("429 with Retry-After %q: %s", a.retryAfter, a.body)
			}
		default:
			t.Errorf("answer %d: %s", a.status, a.body)
		}
	}
	t.Logf("burst of %d at a capacity of %d: %v", n, 3*workerCapacity, counts)
	if counts[http.StatusOK] < 3*workerCapacity || counts[http.StatusTooManyRequests] == 0 {
		t.Errorf("answers %v: want at least the capacity served and some refused", counts)
	}
}

// One key with concurrency 2 hammered through both front ends never runs
// more than 2 at once; revoked, it is refused by the other front end
// within a second.
func clusterKeyLimits(t *testing.T, c *testCluster) {
	_, key := c.key("pair", 1_000_000, 2)
	type interval struct{ start, end float64 }
	var mu sync.Mutex
	var ran []interval
	var refused atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 4; i++ {
				a := post(c.fronts[(g+i)%2].url, key, `{"runtime": "bash", "code": "date +%s.%N; sleep 0.4; date +%s.%N"}`)
				switch a.status {
				case http.StatusOK:
					var res execapi.Result
					json.Unmarshal([]byte(a.body), &res)
					f := strings.Fields(res.Stdout)
					if len(f) != 2 {
						t.Errorf("output %q", res.Stdout)
						continue
					}
					s, _ := strconv.ParseFloat(f[0], 64)
					e, _ := strconv.ParseFloat(f[1], 64)
					mu.Lock()
					ran = append(ran, interval{s, e})
					mu.Unlock()
				case http.StatusTooManyRequests:
					if !strings.Contains(a.body, "key_concurrency") {
						t.Errorf("429: %s", a.body)
					}
					refused.Add(1)
				default:
					t.Errorf("answer %d: %s", a.status, a.body)
				}
			}
		}()
	}
	wg.Wait()
	// The most runs of the key inside their sandboxes at any one moment.
	type edge struct {
		at    float64
		delta int
	}
	var edges []edge
	for _, r := range ran {
		edges = append(edges, edge{r.start, 1}, edge{r.end, -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		return edges[i].at < edges[j].at || edges[i].at == edges[j].at && edges[i].delta < edges[j].delta
	})
	most, now := 0, 0
	for _, e := range edges {
		now += e.delta
		most = max(most, now)
	}
	t.Logf("%d runs, %d refused for the key's concurrency, at most %d at once", len(ran), refused.Load(), most)
	if most > 2 || len(ran) < 2 || refused.Load() == 0 {
		t.Errorf("at most %d of the key's runs at once (limit 2), %d ran, %d refused", most, len(ran), refused.Load())
	}
	if r := scratchrun(t, t.TempDir(), "", "keys", "revoke", "pair", "--db", c.db); r.code != 0 {
		t.Fatal(r.stderr)
	}
	revoked := time.Now()
	for {
		a := post(c.fronts[1].url, key, `{"runtime": "bash", "code": "true"}`)
		if a.status == http.StatusUnauthorized {
			break
		}
		if time.Since(revoked) > time.Second {
			t.Fatalf("the other front end still answers %d %s a second after the revoke", a.status, a.body)
		}
	}
	t.Logf("the other front end refused the revoked key %s after the revoke", time.Since(revoked).Round(time.Millisecond))
}

// kill -9 of a worker with calls in flight: each of its calls gets the
// lost-worker error within seconds (none hangs), none is run again on
// another worker, the other calls succeed, and once restarted the worker
// leaves nothing of the sandboxes it had.
func clusterKilledWorker(t *testing.T, c *testCluster, k store.Key, key string) {
	since := time.Now()
	const long = 4
	answers, wait := c.postAtOnce(key, `{"runtime": "bash", "code": "sleep 5; echo done", "limits": {"timeout_ms": 15000}}`, long)
	// Wait until the four run, and take the worker with the most of them.
	var victim int
	deadline := time.Now().Add(30 * time.Second)
	for {
		total, most := 0, -1
		for i, w := range c.workers {
			total += w.sandboxes()
			if most < 0 || w.sandboxes() > c.workers[most].sandboxes() {
				most = i
			}
		}
		if total == long {
			victim = most
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the long calls did not all start:\n%s", c.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	w := c.workers[victim]
	had := w.sandboxes()
	others := map[int]int{}
	for i, o := range c.workers {
		if i != victim {
			others[i] = o.sandboxes()
		}
	}
	w.cmd.Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	w.wait(t)
	// Nothing of the lost calls starts elsewhere: no new sandbox on the
	// other workers while no other call is sent.
	for time.Since(killed) < 3*time.Second {
		for i, n := range others {
			if got := c.workers[i].sandboxes(); got > n {
				t.Errorf("%s went from %d to %d sandboxes after %s died: a lost call was run again", c.workers[i].id, n, got, w.id)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	wait()
	lost, ok := 0, 0
	var slowest time.Duration
	for _, a := range answers {
		switch {
		case a.status == http.StatusBadGateway && strings.Contains(a.body, execapi.CodeWorkerLost) &&
			strings.Contains(a.body, "the code may have run"):
			lost++
			slowest = max(slowest, a.at.Sub(killed))
			if a.at.Sub(killed) > 10*time.Second {
				t.Errorf("the lost-worker error came %s after the kill", a.at.Sub(killed))
			}
		case a.status == http.StatusOK:
			ok++
		default:
			t.Errorf("answer %d: %s", a.status, a.body)
		}
	}
	t.Logf("%s had %d of %d calls when killed: %d lost (the last told %s after the kill), %d succeeded", w.id, had, long, lost,
		slowest.Round(time.Millisecond), ok)
	if lost != had || ok != long-had {
		t.Errorf("%d lost and %d succeeded; %s had %d of the %d", lost, ok, w.id, had, long)
	}
	rows, _ := c.keys.ListUsage(context.Background(), store.UsageFilter{KeyIDs: []string{k.ID}, Since: since})
	lostRows := 0
	for _, u := range rows {
		if u.Outcome == "worker_lost" {
			lostRows++
			if u.Worker != w.id {
				t.Errorf("lost on %q, want %s", u.Worker, w.id)
			}
		}
	}
	if lostRows != had || len(rows) != long {
		t.Errorf("%d usage rows, %d of them worker_lost; want %d and %d", len(rows), lostRows, long, had)
	}
	// The others take the calls meanwhile.
	c.waitWorkers(2)
	for i := 0; i < 6; i++ {
		if a := post(c.fronts[i%2].url, key, `{"runtime": "bash", "code": "echo after"}`); a.status != http.StatusOK {
			t.Errorf("a call after the kill: %d %s", a.status, a.body)
		}
	}
	// Restarted on the same state directory and cgroup parent, it sweeps
	// what its killed self left.
	c.workers[victim] = c.startWorker(victim)
	if left := sandboxGroupsLeft(w.level); len(left) > 0 {
		t.Errorf("left by the killed %s after its restart: %v", w.id, left)
	}
	c.waitWorkers(3)
}

// Killing one of the three NATS nodes while calls flow: they keep
// succeeding.
func clusterKilledNATSNode(t *testing.T, c *testCluster, key string) {
	var failures, calls atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// Fewer callers than two workers' capacity: while one worker moves to
	// another node, the others take every call.
	for g := 0; g < 2*workerCapacity; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				a := post(c.fronts[(g+i)%2].url, key, fmt.Sprintf(`{"runtime": "bash", "code": "echo %d"}`, i))
				calls.Add(1)
				if a.status != http.StatusOK || !strings.Contains(a.body, fmt.Sprintf(`"stdout":"%d\n"`, i)) {
					failures.Add(1)
					t.Errorf("a call during the node's loss: %d %s", a.status, a.body)
				}
			}
		}()
	}
	time.Sleep(time.Second)
	c.nats.Kill(0)
	time.Sleep(4 * time.Second)
	c.nats.Restart(0)
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	t.Logf("%d calls while a NATS node was killed and restarted, %d failed", calls.Load(), failures.Load())
	c.waitWorkers(3)
}

// SIGTERM of a worker under load: it leaves the registry, its runs
// finish and succeed, new calls go to the others, and it exits 0 with
// nothing left.
func clusterDrainedWorker(t *testing.T, c *testCluster, k store.Key, key string) {
	const long = 4
	answers, wait := c.postAtOnce(key, `{"runtime": "bash", "code": "sleep 3; echo done"}`, long)
	var leaving *workerProcess
	deadline := time.Now().Add(30 * time.Second)
	for leaving == nil {
		for _, w := range c.workers {
			if w.sandboxes() > 0 {
				leaving = w
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no long call started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	leaving.cmd.Process.Signal(syscall.SIGTERM)
	termed := time.Now()
	c.waitWorkers(2)
	for i := 0; i < 6; i++ {
		if a := post(c.fronts[i%2].url, key, `{"runtime": "bash", "code": "echo elsewhere"}`); a.status != http.StatusOK {
			t.Errorf("a call during the drain: %d %s", a.status, a.body)
		}
	}
	wait()
	for _, a := range answers {
		if a.status != http.StatusOK || !strings.Contains(a.body, `"stdout":"done\n"`) {
			t.Errorf("a long call across the drain: %d %s", a.status, a.body)
		}
	}
	if code := leaving.wait(t); code != 0 {
		t.Errorf("%s exited %d after SIGTERM:\n%s", leaving.id, code, leaving.stderr())
	}
	rows, _ := c.keys.ListUsage(context.Background(), store.UsageFilter{KeyIDs: []string{k.ID}, Since: termed})
	for _, u := range rows {
		if u.Worker == leaving.id && u.Runtime == "bash" && u.Duration < 2*time.Second {
			t.Errorf("%s took a new call after its SIGTERM: %+v", leaving.id, u)
		}
	}
	if left := sandboxGroupsLeft(leaving.level); len(left) > 0 {
		t.Errorf("left by the drained %s: %v", leaving.id, left)
	}
}

// MCP across the hop: progress notifications carry the output the worker
// streams, and a client's cancel kills the sandbox on its worker.
func clusterMCP(t *testing.T, c *testCluster, key string) {
	ctx, cancelAll := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancelAll()
	var mu sync.Mutex
	var progress []string
	client := mcp.NewClient(&mcp.Implementation{Name: "cluster-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			progress = append(progress, r.Params.Message)
		}})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: c.fronts[1].url + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{key}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "scratchrun_exec", Arguments: map[string]any{"runtime": "python3.13", "code": "print('over the hop')"}})
	if err != nil || res.IsError || !strings.Contains(fmt.Sprint(res.StructuredContent), "over the hop") {
		t.Fatalf("tool call: %v %+v", err, res)
	}
	callCtx, cancel := context.WithCancel(ctx)
	params := &mcp.CallToolParams{Name: "scratchrun_exec", Arguments: map[string]any{
		"runtime": "bash", "code": "echo running; sleep 25; echo never", "timeout_ms": 30000}}
	params.SetProgressToken("across")
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(callCtx, params)
		done <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		seen := strings.Join(progress, "\n")
		mu.Unlock()
		if strings.Contains(seen, "running") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no progress with the output came: %q", seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled call returned a result")
	}
	cancelled := time.Now()
	for {
		n := 0
		for _, w := range c.workers {
			n += w.sandboxes()
		}
		if n == 0 {
			break
		}
		if time.Since(cancelled) > 10*time.Second {
			t.Fatalf("the cancelled call's sandbox still runs on its worker %s later", time.Since(cancelled))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the cancelled call's sandbox was gone %s after the cancel", time.Since(cancelled).Round(time.Millisecond))
}
