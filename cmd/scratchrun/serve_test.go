package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/store"
	"github.com/scratchrun/scratchrun/internal/testenv"
	"github.com/scratchrun/scratchrun/internal/testenv/postgres"
)

// These tests run `scratchrun serve` and `scratchrun keys` as an operator
// would: the real binary, a real SQLite file or PostgreSQL database (a
// throwaway server, testenv/postgres), a socket on 127.0.0.1.

var keyLine = regexp.MustCompile(`^sr_live_[0-9A-Za-z]{43}$`)

// createKey runs `keys create` and returns the key from the last line.
func createKey(t *testing.T, db, name string, extra ...string) string {
	t.Helper()
	r := scratchrun(t, t.TempDir(), "", append([]string{"keys", "create", "--name", name, "--db", db}, extra...)...)
	if r.code != 0 {
		t.Fatalf("keys create: exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	key := lines[len(lines)-1]
	if !keyLine.MatchString(key) {
		t.Fatalf("last line of keys create is %q, not a key alone", key)
	}
	return key
}

// serveProcess is a running `scratchrun serve`.
type serveProcess struct {
	process
	// url is where it listens, as it says.
	url string
}

// startServe starts the binary on a free loopback port and waits until it
// says where it listens.
func startServe(t *testing.T, args ...string) *serveProcess {
	t.Helper()
	return startServeEnv(t, nil, args...)
}

// startServeEnv is startServe with variables added to the environment.
func startServeEnv(t *testing.T, env []string, args ...string) *serveProcess {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	p := &serveProcess{process: process{name: "serve"}}
	p.url = p.start(t, cmd, regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`), "listening")
	return p
}

func httpCall(method, url, key, body string) (int, string, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: 90 * time.Second}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data), err
}

// metricLine reads one series from /metrics, which needs key once keys exist.
func metricLine(url, key, name string) string {
	_, body, _ := httpCall(http.MethodGet, url+"/metrics", key, "")
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, name+" ") {
			return strings.TrimPrefix(line, name+" ")
		}
	}
	return ""
}

// SIGTERM drains: the run in flight completes with 200, new requests get 503
// or find the port closed, the process exits 0, and no sandbox is left.
func TestServeSIGTERMDrains(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	before := leakcheck.Take(leakOpts)
	db := filepath.Join(t.TempDir(), "keys.db")
	key := createKey(t, db, "drain")
	p := startServe(t, "--db", db, "--capacity", "2")

	type result struct {
		status int
		body   string
		err    error
	}
	long := make(chan result, 1)
	go func() {
		s, b, err := httpCall(http.MethodPost, p.url+"/v1/exec", key, `{"runtime": "bash", "code": "sleep 2; echo finished", "limits": {"timeout_ms": 20000}}`)
		long <- result{s, b, err}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for metricLine(p.url, key, "scratchrun_sandboxes_in_use") != "1" {
		if time.Now().After(deadline) {
			t.Fatalf("the run never started:\n%s", p.stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Once readiness fails the server has begun draining.
	for {
		s, _, err := httpCall(http.MethodGet, p.url+"/readyz", "", "")
		if err != nil || s == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("readyz never failed after SIGTERM")
		}
		time.Sleep(20 * time.Millisecond)
	}
	s, body, err := httpCall(http.MethodPost, p.url+"/v1/exec", key, `{"runtime": "bash", "code": "echo late"}`)
	switch {
	case err != nil && strings.Contains(err.Error(), "refused"):
	case err == nil && s == http.StatusServiceUnavailable && strings.Contains(body, `"code":"draining"`):
	default:
		t.Errorf("request after SIGTERM: %d %s %v", s, body, err)
	}
	r := <-long
	if r.err != nil || r.status != http.StatusOK || !strings.Contains(r.body, `"stdout":"finished\n"`) {
		t.Errorf("run in flight at SIGTERM: %d %s %v", r.status, r.body, r.err)
	}
	if code := p.wait(t); code != 0 {
		t.Errorf("serve exited %d after SIGTERM:\n%s", code, p.stderr())
	}
	if !strings.Contains(p.stderr(), "drained") {
		t.Errorf("no drain reported:\n%s", p.stderr())
	}
	if left := leakcheck.WaitClean(before, leakOpts, 5*time.Second); len(left) > 0 {
		t.Errorf("left behind after the drain:\n  %s", strings.Join(left, "\n  "))
	}
	// The run is accounted.
	u := scratchrun(t, t.TempDir(), "", "keys", "usage", "--db", db, "--runs")
	if u.code != 0 || !strings.Contains(u.stdout, "drain") || !strings.Contains(u.stdout, "success") {
		t.Errorf("keys usage after the drain: %d %s %s", u.code, u.stdout, u.stderr)
	}
}

// Without keys the server refuses an address beyond loopback, unless told.
func TestServeRefusesNonLoopbackWithoutKeys(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	db := filepath.Join(t.TempDir(), "keys.db")
	for _, args := range [][]string{
		{"serve", "--addr", "0.0.0.0:0", "--db", db},
		{"serve", "--addr", ":0", "--db", db},
		{"serve", "--addr", "[::]:0", "--db", db},
	} {
		r := scratchrun(t, t.TempDir(), "", args...)
		if r.code != 2 || !strings.Contains(r.stderr, "refusing") || !strings.Contains(r.stderr, "keys create") {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	t.Setenv("SCRATCHRUN_ADDR", "0.0.0.0:0")
	if r := scratchrun(t, t.TempDir(), "", "serve", "--db", db); r.code != 2 || !strings.Contains(r.stderr, "refusing") {
		t.Errorf("SCRATCHRUN_ADDR: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, args := range [][]string{
		{"serve", "--max-body", "lots", "--db", db},
		{"serve", "--capacity", "-1", "--db", db},
		{"serve", "extra", "--db", db},
		{"serve", "--no-such-flag"},
	} {
		if r := scratchrun(t, t.TempDir(), "", args...); r.code != 2 {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
}

// keys create, list, set, revoke and usage, as docs/server.md shows them, on a
// SQLite file and on a PostgreSQL database.
func TestKeysCommands(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	t.Run("sqlite", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "keys.db")
		key := keysCommands(t, db)
		if data, _ := os.ReadFile(db); strings.Contains(string(data), key) {
			t.Error("the database holds the key itself")
		}
	})
	t.Run("postgres", func(t *testing.T) {
		keysCommands(t, postgres.Shared(t).NewDatabase(t))
	})
}

// keysCommands runs the keys commands on db and returns the key it made.
func keysCommands(t *testing.T, db string) string {
	dir := t.TempDir()
	key := createKey(t, db, "ci", "--rate", "30/min", "--concurrency", "2")
	t.Setenv("SCRATCHRUN_DB", db) // the variable works like --db
	r := scratchrun(t, dir, "", "keys", "list")
	if r.code != 0 || !strings.Contains(r.stdout, "ci") || !strings.Contains(r.stdout, "30/min") || !strings.Contains(r.stdout, "active") {
		t.Fatalf("keys list: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, key) || strings.Contains(r.stdout, key[12:]) {
		t.Error("keys list shows the secret")
	}
	if r := scratchrun(t, dir, "", "keys", "create", "--name", "ci"); r.code != 2 || !strings.Contains(r.stderr, "already") {
		t.Errorf("duplicate name: %d %s", r.code, r.stderr)
	}
	for _, args := range [][]string{
		{"keys", "create"},
		{"keys", "create", "--name", "x", "--rate", "fast"},
		{"keys", "create", "--name", "x", "--concurrency", "0"},
		{"keys", "create", "--name", "bad name"},
		{"keys", "revoke"},
		{"keys", "set", "ci"},
		{"keys", "set", "ci", "--concurrency", "0"},
		{"keys", "set", "ci", "--rate", "0/min"},
		{"keys", "set", "--rate", "5/min"},
		{"keys", "usage", "--since", "yesterday"},
		{"keys", "usage", "--key", "nobody"},
		{"keys", "frobnicate"},
	} {
		if r := scratchrun(t, dir, "", args...); r.code != 2 {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	if r := scratchrun(t, dir, "", "keys", "set", "ci", "--rate", "90/min"); r.code != 0 || !strings.Contains(r.stdout, "90 runs/min, 2 at once") {
		t.Errorf("keys set --rate: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := scratchrun(t, dir, "", "keys", "set", "ci", "--concurrency", "3"); r.code != 0 || !strings.Contains(r.stdout, "90 runs/min, 3 at once") {
		t.Errorf("keys set --concurrency: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := scratchrun(t, dir, "", "keys", "list"); !regexp.MustCompile(`ci\s+sr_live_\S+\s+90/min\s+3\s`).MatchString(r.stdout) {
		t.Errorf("keys list after set: %s", r.stdout)
	}
	if r := scratchrun(t, dir, "", "keys", "usage", "--since", "24h", "--key", "ci"); r.code != 0 || !strings.Contains(r.stdout, "RUNS") {
		t.Errorf("keys usage: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := scratchrun(t, dir, "", "keys", "usage", "--runs"); r.code != 0 || !strings.Contains(r.stdout, "WORKER") {
		t.Errorf("keys usage --runs: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := scratchrun(t, dir, "", "keys", "revoke", "ci"); r.code != 0 || !strings.Contains(r.stdout, "revoked") {
		t.Fatalf("keys revoke: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := scratchrun(t, dir, "", "keys", "revoke", "ci"); r.code == 0 {
		t.Error("revoking twice succeeded")
	}
	if r := scratchrun(t, dir, "", "keys", "set", "ci", "--rate", "5/min"); r.code == 0 {
		t.Error("changing a revoked key's limits succeeded")
	}
	if r := scratchrun(t, dir, "", "keys", "list"); !strings.Contains(r.stdout, "revoked") {
		t.Errorf("keys list after revoke: %s", r.stdout)
	}
	return key
}

// A database that cannot be opened is named in the error, its password
// never; a URL of another database is refused as such.
func TestKeysDatabaseErrors(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	dir := t.TempDir()
	r := scratchrun(t, dir, "", "keys", "list", "--db", "postgres://agent:hunter2@/nosuch?host="+dir)
	if r.code == 0 || strings.Contains(r.stderr, "hunter2") || !strings.Contains(r.stderr, "postgres://agent:xxxxx@/nosuch") {
		t.Errorf("unreachable PostgreSQL: exit %d, stderr %q", r.code, r.stderr)
	}
	r = scratchrun(t, dir, "", "keys", "list", "--db", "mysql://agent:hunter2@db/keys")
	if r.code == 0 || strings.Contains(r.stderr, "hunter2") || !strings.Contains(r.stderr, "postgres://") {
		t.Errorf("a MySQL URL: exit %d, stderr %q", r.code, r.stderr)
	}
}

// Two `serve` processes over one PostgreSQL database, as two machines'
// front ends: a key with concurrency 1 running on one is refused by the
// other; when the first is killed (-9: it releases nothing) mid-run, its
// slot comes back within the lease time; `keys revoke` stops the key on the
// survivor at once; every run was recorded once, as the local worker's.
func TestServeFrontEndsShareAPostgresKeyStore(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	db := postgres.Shared(t).NewDatabase(t)
	// After the shared PostgreSQL server is up: it outlives the test.
	before := leakcheck.Take(leakOpts)
	key := createKey(t, db, "shared", "--rate", "600/min", "--concurrency", "1")
	a := startServe(t, "--db", db)
	b := startServe(t, "--db", db)
	// serve's readiness probe runs a sandbox of no key as it starts; once
	// /readyz has answered it is over, so that the one sandbox in use
	// awaited below is the key's call, holding its slot.
	if code, body, err := httpCall(http.MethodGet, a.url+"/readyz", "", ""); code != http.StatusOK {
		t.Fatalf("readyz of the first front end: %d %s %v", code, body, err)
	}
	go httpCall(http.MethodPost, a.url+"/v1/exec", key, `{"runtime": "bash", "code": "sleep 25", "limits": {"timeout_ms": 30000}}`)
	deadline := time.Now().Add(60 * time.Second)
	for metricLine(a.url, key, "scratchrun_sandboxes_in_use") != "1" {
		if time.Now().After(deadline) {
			t.Fatalf("the long run never started:\n%s", a.stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	quick := `{"runtime": "bash", "code": "echo hi"}`
	if code, body, err := httpCall(http.MethodPost, b.url+"/v1/exec", key, quick); code != http.StatusTooManyRequests || !strings.Contains(body, "key_concurrency") {
		t.Fatalf("the other front end while the key's one call runs: %d %s %v", code, body, err)
	}
	a.cmd.Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	a.wait(t)
	var freed time.Duration
	for {
		code, body, err := httpCall(http.MethodPost, b.url+"/v1/exec", key, quick)
		if code == http.StatusOK {
			freed = time.Since(killed)
			break
		}
		if code != http.StatusTooManyRequests || !strings.Contains(body, "key_concurrency") {
			t.Fatalf("after the kill: %d %s %v", code, body, err)
		}
		if time.Since(killed) > store.LeaseTTL+30*time.Second {
			t.Fatalf("the killed front end's slot is still taken %s later", time.Since(killed))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the slot of a front end killed mid-run was free again %s after the kill (lease %s)", freed.Round(time.Millisecond), store.LeaseTTL)
	if freed > store.LeaseTTL+3*time.Second {
		t.Errorf("slot freed %s after the kill; want within the lease time (%s) and a margin", freed.Round(time.Millisecond), store.LeaseTTL)
	}
	if r := scratchrun(t, t.TempDir(), "", "keys", "revoke", "shared", "--db", db); r.code != 0 {
		t.Fatal(r.stderr)
	}
	if code, body, _ := httpCall(http.MethodPost, b.url+"/v1/exec", key, quick); code != http.StatusUnauthorized {
		t.Errorf("the survivor right after the revoke: %d %s", code, body)
	}
	u := scratchrun(t, t.TempDir(), "", "keys", "usage", "--runs", "--db", db)
	if u.code != 0 || strings.Count(u.stdout, " local ") != 1 {
		t.Errorf("usage: want the one run that ended, on the local worker:\n%s%s", u.stdout, u.stderr)
	}
	b.stop(t)
	// The killed server's sandbox died with it; the next engine sweeps what
	// it left.
	if r := scratchrun(t, t.TempDir(), "", "exec", "--runtime", "bash", "--code", "true"); r.code != 0 {
		t.Errorf("exec after the crash: %d %s", r.code, r.stderr)
	}
	if left := leakcheck.WaitClean(before, leakOpts, 10*time.Second); len(left) > 0 {
		t.Errorf("left behind:\n  %s", strings.Join(left, "\n  "))
	}
}

// bearerTransport adds an API key to every request.
type bearerTransport struct{ key string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// MCP at /mcp on the same server, behind the same keys, with the same
// per-key limits and accounting; a revoked key is refused at once.
func TestServeMCPWithKeys(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	before := leakcheck.Take(leakOpts)
	db := filepath.Join(t.TempDir(), "keys.db")
	// Opening the session spends one of the three, the two runs the rest.
	key := createKey(t, db, "agent", "--rate", "3/min")
	other := createKey(t, db, "other")
	p := startServe(t, "--db", db)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "serve-test", Version: "1"}, nil)

	if _, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.url + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearerTransport{"sr_live_wrong"}}}, nil); err == nil {
		t.Fatal("connected to /mcp with a wrong key")
	}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.url + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{key}}}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, p.stderr())
	}
	defer cs.Close()
	call := func() *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "scratchrun_exec", Arguments: map[string]any{"runtime": "bash", "code": "echo via-mcp"}})
		if err != nil {
			t.Fatalf("tools/call: %v", err)
		}
		return res
	}
	text := func(res *mcp.CallToolResult) string {
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String()
	}
	for range 2 {
		if res := call(); res.IsError || !strings.Contains(text(res), "via-mcp") {
			t.Fatalf("tool result: %s", text(res))
		}
	}
	// The key's rate (3/min, one spent opening the session) applies to MCP
	// runs too.
	if res := call(); !res.IsError || !strings.Contains(text(res), "runs per minute") {
		t.Errorf("third call over a 3/min rate with the session opened: error %v: %s", res.IsError, text(res))
	}
	u := scratchrun(t, t.TempDir(), "", "keys", "usage", "--db", db, "--key", "agent")
	if u.code != 0 || !regexp.MustCompile(`agent\s+2\s`).MatchString(u.stdout) {
		t.Errorf("usage of the MCP runs: %s %s", u.stdout, u.stderr)
	}
	// Another key cannot use this key's session.
	sid := cs.ID()
	req, _ := http.NewRequest(http.MethodPost, p.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer "+other)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("another key on this session: %v %v", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}
	// Revoked: the next MCP request is refused.
	if r := scratchrun(t, t.TempDir(), "", "keys", "revoke", "agent", "--db", db); r.code != 0 {
		t.Fatal(r.stderr)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "scratchrun_exec", Arguments: map[string]any{"runtime": "bash", "code": "echo"}}); err == nil {
		t.Error("a revoked key's MCP call went through")
	}
	cs.Close()
	p.stop(t)
	if left := leakcheck.WaitClean(before, leakOpts, 5*time.Second); len(left) > 0 {
		t.Errorf("left behind:\n  %s", strings.Join(left, "\n  "))
	}
}

// Started with no keys on loopback, the server says once that it runs
// without authentication, and serves.
func TestServeOpenOnLoopback(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	db := filepath.Join(t.TempDir(), "keys.db")
	p := startServe(t, "--db", db)
	if n := strings.Count(p.stderr(), "WITHOUT authentication"); n != 1 {
		t.Errorf("the open mode is announced %d times:\n%s", n, p.stderr())
	}
	s, body, err := httpCall(http.MethodGet, p.url+"/v1/runtimes", "", "")
	var info struct{ Runtimes []struct{ Name string } }
	if err != nil || s != 200 || json.Unmarshal([]byte(body), &info) != nil || len(info.Runtimes) < 4 {
		t.Errorf("GET /v1/runtimes: %d %s %v", s, body, err)
	}
	p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.wait(t); code != 0 {
		t.Errorf("exit %d after SIGINT:\n%s", code, p.stderr())
	}
}

// serve's admission flags reach the engine, and GET /v1/runtimes and
// /metrics say how admission decides: the memory budget (which the
// sandboxes' cgroup parent gets as its limit), the CPU threshold and its
// gauge, the upper bound and the queue.
func TestServeDescribesAdmission(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	p := startServe(t, "--db", filepath.Join(t.TempDir(), "keys.db"), "--memory-budget", "3GiB", "--cpu-threshold", "0.6",
		"--capacity", "7", "--queue", "9", "--queue-wait", "1500ms")
	s, body, err := httpCall(http.MethodGet, p.url+"/v1/runtimes", "", "")
	var info struct{ Admission *execapi.AdmissionInfo }
	if err != nil || s != 200 || json.Unmarshal([]byte(body), &info) != nil || info.Admission == nil {
		t.Fatalf("GET /v1/runtimes: %d %s %v", s, body, err)
	}
	a := info.Admission
	if a.MemoryBudgetBytes != 3<<30 || a.CallFloorBytes <= 0 || a.CPUThreshold != 0.6 || a.CPUGauge == "" ||
		a.Capacity != 7 || a.MaxQueue != 9 || a.QueueWaitMS != 1500 || a.Free < 1 || len(a.Rejections) != len(execapi.AdmissionRefusals) {
		t.Errorf("admission: %+v", a)
	}
	limit := "/sys/fs/cgroup/memory/" + cgroupParent + "/memory.limit_in_bytes"
	if _, err := os.Stat("/sys/fs/cgroup/memory"); err != nil {
		limit = "/sys/fs/cgroup/" + cgroupParent + "/memory.max"
	}
	if data, err := os.ReadFile(limit); err != nil || strings.TrimSpace(string(data)) != strconv.Itoa(3<<30) {
		t.Errorf("the sandboxes' cgroup parent's limit: %q %v, want the budget", data, err)
	}
	for _, want := range []string{"scratchrun_admission_memory_budget_bytes 3.221225472e+09", "scratchrun_admission_cpu_threshold 0.6",
		"scratchrun_capacity 7", `scratchrun_rejections_total{reason="memory"} 0`, `scratchrun_rejections_total{reason="cpu"} 0`} {
		if _, m, _ := httpCall(http.MethodGet, p.url+"/metrics", "", ""); !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	p.stop(t)
}
