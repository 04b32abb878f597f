package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/store"
	"github.com/scratchrun/scratchrun/internal/testenv"
	"github.com/scratchrun/scratchrun/internal/testenv/natsserver"
	"github.com/scratchrun/scratchrun/internal/testenv/postgres"
)

// A cluster on this machine as an operator would run it on several: three
// NATS servers (in this process, on loopback, with TLS and the users and
// permissions of deploy/nats/auth.conf), a throwaway PostgreSQL, three
// `scratchrun worker` processes (each with a state directory and cgroup
// parent of its own, as on machines of their own) and two `scratchrun
// serve --nats` front ends sharing the database.

// workerLevels are the workers' own directories and cgroup parents (and
// the suite's leak check of each).
var workerLevels = []*testenv.Level{env.Level("worker-1", nil), env.Level("worker-2", nil), env.Level("worker-3", nil)}

// workerCapacity is each worker's --capacity: small, so that a burst
// finds the cluster full.
const workerCapacity = 2

// testCluster is the running cluster.
type testCluster struct {
	t       *testing.T
	dir     string
	nats    *natsserver.Cluster
	db      string
	keys    *store.Store
	ca      string
	secrets map[string]string // NATS user -> password
	workers []*workerProcess
	fronts  []*serveProcess
	// metrics are the front ends' keyless /metrics addresses.
	metrics []string
	// sessions is whether workers and front ends hold sessions
	// (--sessions).
	sessions bool
}

// clusterShape is how many workers (of workerLevels) and front ends a
// test cluster has, and whether they hold sessions.
type clusterShape struct {
	workers, fronts int
	sessions        bool
}

// workerProcess is one running `scratchrun worker`.
type workerProcess struct {
	process
	id    string
	level *testenv.Level
}

// startCluster starts everything and waits until both front ends see the
// three workers.
func startCluster(t *testing.T) *testCluster {
	t.Helper()
	return startClusterOf(t, clusterShape{workers: len(workerLevels), fronts: 2})
}

// startClusterOf starts a cluster of shape and waits until its front
// ends see its workers.
func startClusterOf(t *testing.T, shape clusterShape) *testCluster {
	t.Helper()
	c := &testCluster{t: t, dir: t.TempDir(), secrets: map[string]string{}, sessions: shape.sessions}
	for _, user := range []string{"frontend", "worker-1", "worker-2", "worker-3"} {
		c.secrets[user] = randomSecret(t)
		t.Setenv("SCRATCHRUN_NATS_"+strings.ToUpper(strings.ReplaceAll(user, "-", "_"))+"_PASSWORD", c.secrets[user])
	}
	ca, cert, key := natsserver.WriteTestPKI(t, c.dir)
	c.ca = ca
	c.nats = natsserver.Start(t, natsserver.Options{Nodes: 3, TLS: &natsserver.TLS{Cert: cert, Key: key, CA: ca},
		Include: []string{"../../deploy/nats/auth.conf"}})
	c.db = postgres.Shared(t).NewDatabase(t)
	var err error
	if c.keys, err = store.Open(context.Background(), c.db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.keys.Close() })
	// The workers stop before the servers do (cleanups run in reverse).
	for i := range shape.workers {
		c.workers = append(c.workers, c.startWorker(i))
	}
	// Each front end picks its metrics port and says which: a port found
	// free beforehand could be taken by the time it listens.
	metricsAt := regexp.MustCompile(`metrics \(no key\) at (http://127\.0\.0\.1:\d+)/metrics`)
	for range shape.fronts {
		args := []string{"--nats", strings.Join(c.nats.URLs(), ","), "--nats-ca", c.ca, "--nats-user", "frontend",
			"--db", c.db, "--metrics-addr", "127.0.0.1:0"}
		if c.sessions {
			args = append(args, "--sessions")
		}
		fe := startServeEnv(t, []string{"SCRATCHRUN_NATS_PASSWORD=" + c.secrets["frontend"]}, args...)
		c.fronts = append(c.fronts, fe)
		c.metrics = append(c.metrics, fe.waitLog(t, metricsAt))
	}
	c.waitWorkers(shape.workers)
	return c
}

// workerArgs are worker i's command line: worker-3 offers no python3.11.
func (c *testCluster) workerArgs(i int) []string {
	id := workerLevels[i].Name
	runtimes := "bash,python3.13,python3.11"
	if id == "worker-3" {
		runtimes = "bash,python3.13"
	}
	args := []string{"worker", "--nats", strings.Join(c.nats.URLs(), ","), "--nats-ca", c.ca, "--nats-user", id,
		"--runtimes", runtimes, "--capacity", strconv.Itoa(workerCapacity)}
	if c.sessions {
		args = append(args, "--sessions")
	}
	return args
}

// startWorker starts worker i and waits until it says it serves.
func (c *testCluster) startWorker(i int) *workerProcess {
	t := c.t
	t.Helper()
	level := workerLevels[i]
	w := &workerProcess{process: process{name: level.Name}, id: level.Name, level: level}
	cmd := exec.Command(binary, c.workerArgs(i)...)
	// The warm pool is off: what these tests count is the calls'
	// sandboxes, and a pool rebuilding beside them only costs CPU.
	cmd.Env = append(os.Environ(), "SCRATCHRUN_STATE_DIR="+level.StateDir, "SCRATCHRUN_CGROUP_PARENT="+level.CgroupParent,
		"SCRATCHRUN_NATS_PASSWORD="+c.secrets[level.Name], "SCRATCHRUN_POOL_FLOOR=0")
	w.start(t, cmd, regexp.MustCompile(`serving calls from NATS`), "serving")
	return w
}

// sandboxes counts the sandboxes a worker has now: the groups under its
// cgroup parent (the pool is off: each is a call's).
func (w *workerProcess) sandboxes() int {
	groups, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/memory", w.level.CgroupParent, "*"))
	n := 0
	for _, g := range groups {
		if fi, err := os.Stat(g); err == nil && fi.IsDir() {
			n++
		}
	}
	return n
}

// waitWorkers waits until both front ends count n live workers.
func (c *testCluster) waitWorkers(n int) {
	c.t.Helper()
	want := strconv.Itoa(n)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok := true
		for _, m := range c.metrics {
			ok = ok && metricLine(m, "", "scratchrun_cluster_workers") == want
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the front ends do not see %d workers:\n%s\n%s", n, c.fronts[0].stderr(), c.fronts[1].stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// key creates an API key in the shared database.
func (c *testCluster) key(name string, rate, concurrency int) (store.Key, string) {
	c.t.Helper()
	k, secret, err := c.keys.CreateKey(context.Background(), store.NewKey{Name: name, RatePerMin: rate, Concurrency: concurrency})
	if err != nil {
		c.t.Fatal(err)
	}
	return k, secret
}

// answer is one HTTP answer.
type answer struct {
	status     int
	body       string
	retryAfter string
	took       time.Duration
	// at is when the answer came.
	at time.Time
}

// clusterClient has no pooled connections to keep: each call's own.
var clusterClient = &http.Client{Timeout: 120 * time.Second}

// post sends a request to a front end.
func post(url, key, body string) answer {
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/exec", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	start := time.Now()
	resp, err := clusterClient.Do(req)
	if err != nil {
		return answer{status: -1, body: err.Error(), took: time.Since(start), at: time.Now()}
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, body: string(data), retryAfter: resp.Header.Get("Retry-After"), took: time.Since(start), at: time.Now()}
}

// logs are every process's stderr, for a failure's message.
func (c *testCluster) logs() string {
	var b strings.Builder
	for _, w := range c.workers {
		fmt.Fprintf(&b, "--- %s\n%s", w.id, w.stderr())
	}
	for i, f := range c.fronts {
		fmt.Fprintf(&b, "--- front end %d\n%s", i+1, f.stderr())
	}
	return b.String()
}

// checkClean fails t when a worker's sandboxes left anything.
func (c *testCluster) checkClean(t *testing.T, before map[string]leakcheck.Snapshot) {
	t.Helper()
	for _, l := range workerLevels {
		l.CheckClean(t, before[l.Name])
	}
}

// snapshot records what each worker's sandboxes would leave, now.
func snapshot() map[string]leakcheck.Snapshot {
	out := map[string]leakcheck.Snapshot{}
	for _, l := range workerLevels {
		out[l.Name] = l.Snapshot()
	}
	return out
}

func randomSecret(t *testing.T) string {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", b)
}

// sandboxGroupsLeft waits until a worker's cgroup parent holds no
// sandbox's group (in any hierarchy) and returns those still there after
// 10 s: what its sandboxes left.
func sandboxGroupsLeft(l *testenv.Level) []string {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		for _, pattern := range []string{"/sys/fs/cgroup/*/" + l.CgroupParent + "/*", "/sys/fs/cgroup/" + l.CgroupParent + "/*"} {
			matches, _ := filepath.Glob(pattern)
			for _, m := range matches {
				if fi, err := os.Stat(m); err == nil && fi.IsDir() {
					left = append(left, m)
				}
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopAll stops the front ends and the workers with SIGTERM (each must
// drain and exit 0), and closes the test's own database connections.
func (c *testCluster) stopAll(t *testing.T) {
	t.Helper()
	defer c.keys.Close()
	for _, f := range c.fronts {
		if !f.exited() {
			f.cmd.Process.Signal(syscall.SIGTERM)
			if code := f.wait(t); code != 0 {
				t.Errorf("a front end exited %d:\n%s", code, f.stderr())
			}
		}
	}
	for _, w := range c.workers {
		if !w.exited() {
			w.cmd.Process.Signal(syscall.SIGTERM)
			if code := w.wait(t); code != 0 {
				t.Errorf("%s exited %d:\n%s", w.id, code, w.stderr())
			}
		}
	}
}

// postAtOnce sends n calls of body at once, alternating front ends;
// wait returns once every one is answered, into answers (in order).
func (c *testCluster) postAtOnce(key, body string, n int) (answers []answer, wait func()) {
	answers = make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = post(c.fronts[i%2].url, key, body)
		}()
	}
	return answers, wg.Wait
}
