package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scratchrun/scratchrun/internal/admission"
	"github.com/scratchrun/scratchrun/internal/engine"
	"github.com/scratchrun/scratchrun/internal/engine/enginetest"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
	"github.com/scratchrun/scratchrun/internal/images"
	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/mcpserver"
	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/sandboxtest"
	"github.com/scratchrun/scratchrun/internal/store"
	"github.com/scratchrun/scratchrun/internal/testenv"
	"github.com/scratchrun/scratchrun/internal/testenv/levels"
	"github.com/scratchrun/scratchrun/internal/testenv/postgres"
)

// These tests run the real server on a 127.0.0.1 socket with real SQLite
// files. Those about what runs run over the real engine, real sandboxes on
// the real images (missing images fail them), and check that their server
// left no sandbox behind; those about the front end alone (admission, keys,
// refusals, routes, connections) run over a scripted service
// (execapitest), in milliseconds, without root.

var (
	// The environment (directories of the binary's own, the image store,
	// the shared backend, the final leak check) is package testenv's.
	env      = testenv.New("httpapi")
	nsLevel  = env.Level("namespaces", levels.Namespaces)
	leakOpts = nsLevel.Leak

	imageStore *images.Store
	backend    *countingBackend
)

func TestMain(m *testing.M) {
	// The PostgreSQL server of the tests of front ends sharing a database.
	env.AtEnd(postgres.StopShared)
	env.Main(m)
}

// countingBackend counts sandboxes created, so tests can prove that refused
// requests never reach one.
type countingBackend struct {
	sandbox.Backend
	created atomic.Int64
}

// Unwrap is the backend counted (sandbox.BackendAs finds its memory gauge).
func (c *countingBackend) Unwrap() sandbox.Backend { return c.Backend }

func (c *countingBackend) Create(ctx context.Context, cfg sandbox.Config) (sandbox.Sandbox, error) {
	c.created.Add(1)
	return c.Backend.Create(ctx, cfg)
}

// newTestEngine builds an engine with admission settings adm over the
// shared backend, or over fake when it is set.
func newTestEngine(t *testing.T, adm admission.Settings, fake sandbox.Backend, mutate func(*engine.Config)) *engine.Engine {
	t.Helper()
	// Over a fake backend the engine needs no installed image either.
	var imgs engine.Images = enginetest.NewImages(t, "bash", "python3.13")
	var b sandbox.Backend = fake
	if fake == nil {
		if imageStore == nil {
			imageStore = env.Store(t, "bash", "python3.13")
		}
		imgs = imageStore
		if backend == nil {
			// The level's shared backend: engines close it without closing it.
			backend = &countingBackend{Backend: nsLevel.Backend(t)}
		}
		b = backend
	}
	cfg := engine.DefaultConfig()
	cfg.Admission = adm
	if mutate != nil {
		mutate(&cfg)
	}
	e, err := engine.New(cfg, imgs, b)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

type serverOptions struct {
	// capacity, queueWait and maxQueue are the engine's admission settings
	// (default 2; 2 s, negative for no waiting; 4 per capacity).
	capacity  int
	queueWait time.Duration
	maxQueue  int
	maxBody   int64
	conns     ConnLimits
	// mcp mounts the MCP tool at /mcp, as scratchrun serve does.
	mcp bool
	// fake, when set, is the service the server runs requests on instead
	// of an engine (see scripted): front-end logic alone, no admission.
	fake *execapitest.Service
	// wrap, when set, gives the server fake with methods of its own added
	// (readiness, say), as a cluster's front end has them.
	wrap func(*execapitest.Service) execapi.Service
	// metrics are the service's own collectors (Config.Metrics).
	metrics []prometheus.Collector
	// console, when set, is mounted as the web console (Config.Console).
	console func(svc execapi.Service, live func() Live) http.Handler
	// db, when set, is the key database (a postgres:// URL, or a file
	// another server uses too); by default each server has a SQLite file
	// of its own.
	db string
	// backend, when set, is the fake sandbox backend the engine runs on:
	// the engine and its admission are real, sandboxes scripted (see
	// scriptedBackend).
	backend *sandboxtest.Backend
	// keys, when set, wraps the key database the server is given (the
	// test's own view, testServer.keys, stays the database itself).
	keys func(*store.Store) KeyStore
	// recordTimeout is Config.RecordTimeout.
	recordTimeout time.Duration
	// log receives the server's logs (Config.Logger).
	log *slog.Logger
	// version is Config.Version.
	version string
	// oauth is Config.OAuth.
	oauth *OAuth
	// idemWait is Config.idempotencyWait.
	idemWait time.Duration
	// sessions is Config.Sessions.
	sessions bool
}

// testServer is a real server on 127.0.0.1 with its own key database.
type testServer struct {
	t    *testing.T
	URL  string
	eng  *engine.Engine
	fake *execapitest.Service
	// sessions holds the sessions of a server with sessions on over fake.
	sessions *execapitest.Sessions
	backend  *sandboxtest.Backend
	srv      *Server
	keys     *store.Store
	dbPath   string
	// metricsURL serves the metrics without a key, as --metrics-addr does.
	metricsURL string
	cancel     context.CancelFunc
	served     chan error
	stop       func() error
}

func startServer(t *testing.T, o serverOptions) *testServer {
	t.Helper()
	return startServerWith(t, o, nil)
}

// startServerWith is startServer with a change to the engine's configuration.
func startServerWith(t *testing.T, o serverOptions, mutate func(*engine.Config)) *testServer {
	t.Helper()
	if o.capacity == 0 {
		o.capacity = 2
	}
	adm := admission.Settings{Capacity: o.capacity, QueueWait: o.queueWait, MaxQueue: o.maxQueue}
	if adm.QueueWait == 0 {
		adm.QueueWait = admission.DefaultQueueWait
	}
	if adm.MaxQueue == 0 {
		adm.MaxQueue = 4 * o.capacity
	}
	var eng *engine.Engine
	var svc execapi.CheckedExecutor = o.fake
	if o.fake == nil {
		var fake sandbox.Backend
		if o.backend != nil {
			fake = o.backend
		}
		eng = newTestEngine(t, adm, fake, mutate)
		svc = eng
	}
	dbPath := o.db
	if dbPath == "" {
		dbPath = filepath.Join(t.TempDir(), "keys.db")
	}
	keys, err := store.Open(context.Background(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Service: svc.(execapi.Service), Policy: svc.Policy(), Keys: keys, MaxBodyBytes: o.maxBody, Conns: o.conns, Metrics: o.metrics,
		RecordTimeout: o.recordTimeout, Logger: o.log, Version: o.version, OAuth: o.oauth,
		idempotencyWait: o.idemWait, Sessions: o.sessions}
	if o.keys != nil {
		cfg.Keys = o.keys(keys)
	}
	if o.wrap != nil {
		cfg.Service = o.wrap(o.fake)
	}
	var sessions *execapitest.Sessions
	if _, held := cfg.Service.(execapi.SessionService); o.sessions && o.fake != nil && !held {
		// Sessions on over a scripted service: it holds them too.
		sessions = execapitest.NewSessions(o.fake, testSessionPolicy())
		cfg.Service = sessions
	}
	cfg.Console = o.console
	if o.mcp {
		cfg.MCP = func(svc execapi.Service) http.Handler { return mcpserver.HTTPHandler(svc, mcpserver.Options{}) }
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	metricsSrv := httptest.NewServer(srv.MetricsHandler())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var before leakcheck.Snapshot
	real := eng != nil && o.backend == nil
	if real {
		before = leakcheck.Take(leakOpts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{t: t, URL: "http://" + ln.Addr().String(), eng: eng, fake: o.fake, sessions: sessions, backend: o.backend, srv: srv, keys: keys, dbPath: dbPath,
		metricsURL: metricsSrv.URL, cancel: cancel, served: make(chan error, 1)}
	go func() { ts.served <- srv.Serve(ctx, ln) }()
	var stopped bool
	var stopErr error
	ts.stop = func() error {
		if stopped {
			return stopErr
		}
		stopped = true
		cancel()
		select {
		case stopErr = <-ts.served:
		case <-time.After(90 * time.Second):
			stopErr = fmt.Errorf("Serve did not return within 90 s of cancel")
		}
		return stopErr
	}
	t.Cleanup(func() {
		if err := ts.stop(); err != nil {
			t.Errorf("stop server: %v", err)
		}
		metricsSrv.Close()
		keys.Close()
		if eng == nil {
			return
		}
		// The engine's warm sandboxes go with it (the shared backend stays).
		if err := eng.Close(); err != nil {
			t.Errorf("close engine: %v", err)
		}
		if o.backend != nil && o.backend.Live() != 0 {
			t.Errorf("%d fake sandboxes left", o.backend.Live())
		}
		if !real {
			return
		}
		if left := leakcheck.WaitClean(before, leakOpts, 5*time.Second); len(left) > 0 {
			t.Errorf("left behind:\n  %s", strings.Join(left, "\n  "))
		}
	})
	return ts
}

// key creates an API key and returns its secret.
func (ts *testServer) key(name string, ratePerMin, concurrency int) (store.Key, string) {
	ts.t.Helper()
	k, secret, err := ts.keys.CreateKey(context.Background(), store.NewKey{Name: name, RatePerMin: ratePerMin, Concurrency: concurrency})
	if err != nil {
		ts.t.Fatal(err)
	}
	return k, secret
}

// httpClient has a generous timeout: it only catches hangs.
var httpClient = &http.Client{Timeout: 90 * time.Second}

type answer struct {
	status int
	header http.Header
	body   []byte
	// closed says the server closed the connection after the answer
	// (net/http takes "Connection: close" out of the header).
	closed bool
}

func (a answer) errorBody(t *testing.T) ErrorDetail {
	t.Helper()
	var doc ErrorDocument
	if err := json.Unmarshal(a.body, &doc); err != nil || doc.Error.Code == "" || doc.Error.Message == "" {
		t.Fatalf("status %d: body is not the API's error document: %q (%v)", a.status, a.body, err)
	}
	return doc.Error
}

func (ts *testServer) do(ctx context.Context, method, path, key string, body io.Reader, header map[string]string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, method, ts.URL+path, body)
	if err != nil {
		return answer{}, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil && method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: data, closed: resp.Close}, err
}

// post sends body to /v1/exec and fails the test on a transport error.
func (ts *testServer) post(key, body string) answer {
	ts.t.Helper()
	a, err := ts.do(context.Background(), http.MethodPost, "/v1/exec", key, strings.NewReader(body), nil)
	if err != nil {
		ts.t.Fatalf("POST /v1/exec: %v", err)
	}
	return a
}

// metric reads one sample of the server's metrics, 0 when absent, from
// their own keyless listener.
func (ts *testServer) metric(name string) float64 {
	ts.t.Helper()
	resp, err := httpClient.Get(ts.metricsURL + "/metrics")
	if err != nil {
		ts.t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		ts.t.Fatalf("GET /metrics: %v %d", err, resp.StatusCode)
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+" ") {
			v, _ := strconv.ParseFloat(strings.TrimSpace(line[len(name):]), 64)
			return v
		}
	}
	return 0
}

// scripted is a service for tests of the front end alone: it offers bash
// and python3.13 and plays the little shell these tests send ("sleep 1.5;
// echo done", "exit 3", "true") without a sandbox: sleeps take their time,
// echo prints, exit ends with its status.
func scripted() *execapitest.Service {
	fake := execapitest.New("bash", "python3.13")
	fake.Respond(func(_ context.Context, c execapitest.Call) execapitest.Response {
		var resp execapitest.Response
		var stdout strings.Builder
		exit := 0
		for _, cmd := range strings.Split(c.Checked.Code, ";") {
			verb, arg, _ := strings.Cut(strings.TrimSpace(cmd), " ")
			switch verb {
			case "sleep":
				secs, _ := strconv.ParseFloat(arg, 64)
				resp.Delay += time.Duration(secs * float64(time.Second))
			case "echo":
				stdout.WriteString(arg + "\n")
			case "exit":
				exit, _ = strconv.Atoi(arg)
			}
		}
		resp.Result = execapitest.Exit(exit, stdout.String(), execapi.Facts{})
		return resp
	})
	return fake
}

// scriptedBackend is a fake sandbox backend for tests of admission through
// the server: the engine and its admission are real, and each sandbox
// plays the little shell of scripted from its job's code ("sleep 1.5;
// echo done", "exit 3", "true"), and "hold" lasts until release is
// called or the call is cancelled.
func scriptedBackend() (*sandboxtest.Backend, func()) {
	held := make(chan struct{})
	var once sync.Once
	b := &sandboxtest.Backend{Steps: []sandboxtest.Step{{Memory: 1 << 20, Do: func(ctx context.Context, job sandbox.Job) (sandbox.Outcome, error) {
		var code string
		for _, f := range job.Files {
			if strings.HasPrefix(f.Path, "/code/") {
				code = string(f.Data)
			}
		}
		out := sandbox.Outcome{}
		for _, cmd := range strings.Split(code, ";") {
			verb, arg, _ := strings.Cut(strings.TrimSpace(cmd), " ")
			var wait <-chan time.Time
			var hold <-chan struct{}
			switch verb {
			case "sleep":
				secs, _ := strconv.ParseFloat(arg, 64)
				wait = time.After(time.Duration(secs * float64(time.Second)))
			case "hold":
				hold = held
			case "echo":
				io.WriteString(job.Stdout, arg+"\n")
			case "exit":
				out.ExitCode, _ = strconv.Atoi(arg)
			}
			if wait != nil || hold != nil {
				select {
				case <-wait:
				case <-hold:
				case <-ctx.Done():
					return sandbox.Outcome{}, ctx.Err()
				}
			}
		}
		return out, nil
	}}}}
	return b, func() { once.Do(func() { close(held) }) }
}

// waitFor polls cond until it holds; the bound only catches hangs.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
