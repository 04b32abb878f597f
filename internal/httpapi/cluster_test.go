package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/scratchrun/scratchrun/client"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
	"github.com/scratchrun/scratchrun/internal/mcpserver"
	"github.com/scratchrun/scratchrun/internal/store"
)

// A call lost with a cluster's worker reads the same everywhere: HTTP 502
// with code worker_lost and the one wording (no Retry-After, which would
// invite a blind retry), the MCP tool's error in the same words, the Go
// client's *execapi.WorkerLostError; and it is recorded once, as a run
// with outcome worker_lost on the worker that had it, since it may have
// run. Before, it was a 500 "the run failed" recorded as an error.
func TestWorkerLostReadsTheSameEverywhere(t *testing.T) {
	fake := execapitest.New("bash")
	fake.Respond(func(ctx context.Context, c execapitest.Call) execapitest.Response {
		return execapitest.Response{Err: &execapi.WorkerLostError{Worker: "worker-b", Why: "no word from it for 4s"}}
	})
	ts := startServer(t, serverOptions{mcp: true, fake: fake})
	k, key := ts.key("alice", 1000, 4)
	a := ts.post(key, quickBody)
	doc := a.errorBody(t)
	wording := (&execapi.WorkerLostError{}).Error()
	if a.status != http.StatusBadGateway || doc.Code != execapi.CodeWorkerLost || doc.Message != wording || a.header.Get("Retry-After") != "" {
		t.Errorf("answer %d %+v Retry-After %q", a.status, doc, a.header.Get("Retry-After"))
	}
	_, err := client.New(ts.URL, key).Run(context.Background(), client.Request{Runtime: "bash", Code: "true"})
	var lost *execapi.WorkerLostError
	if !errors.As(err, &lost) || lost.Error() != wording {
		t.Errorf("client: %v (%T), want a *execapi.WorkerLostError", err, err)
	}
	res, err := ts.mcpSession(key).CallTool(context.Background(), &mcp.CallToolParams{Name: mcpserver.ToolName,
		Arguments: map[string]any{"runtime": "bash", "code": "true"}})
	if err != nil || !res.IsError || res.Content[0].(*mcp.TextContent).Text != "T"+wording[1:]+"." {
		t.Errorf("MCP: %+v %v", res, err)
	}
	var rows []store.Usage
	waitFor(t, "three usage rows", func() bool {
		rows, _ = ts.keys.ListUsage(context.Background(), store.UsageFilter{KeyIDs: []string{k.ID}})
		return len(rows) == 3
	})
	for _, u := range rows {
		if u.Outcome != "worker_lost" || u.Worker != "worker-b" || u.ExitCode != -1 {
			t.Errorf("usage row %+v, want outcome worker_lost on worker-b", u)
		}
	}
	if got := ts.metric(`scratchrun_runs_total{outcome="worker_lost",runtime="bash"}`); got != 3 {
		t.Errorf("worker_lost runs counted %v, want 3", got)
	}
}

// No live worker is a 503 refusal (another front end, or a moment later,
// may have one), with Retry-After, counted under its reason.
func TestNoWorkersIsA503(t *testing.T) {
	fake := execapitest.New("bash")
	fake.Respond(func(context.Context, execapitest.Call) execapitest.Response {
		return execapitest.Response{Err: &execapi.Refusal{Reason: execapi.RefusedNoWorkers, RetryAfter: 2 * time.Second}}
	})
	ts := startServer(t, serverOptions{fake: fake})
	refusedAs(t, ts.post("", quickBody), http.StatusServiceUnavailable, execapi.RefusedNoWorkers, 0)
	if got := ts.metric(`scratchrun_rejections_total{reason="no_workers"}`); got != 1 {
		t.Errorf("no_workers rejections %v, want 1", got)
	}
}

// readyService is a scripted service that says itself whether it is
// ready, as a cluster's front end does (a worker is live).
type readyService struct {
	*execapitest.Service
	ready atomic.Pointer[error]
}

func (r *readyService) Ready(context.Context) error {
	if err := r.ready.Load(); err != nil {
		return *err
	}
	return nil
}

// A service that reports its own readiness is asked, and no probe runs a
// sandbox; the service's own metrics are exported beside the server's.
func TestServiceReadinessAndMetrics(t *testing.T) {
	fake := execapitest.New("bash")
	rs := &readyService{Service: fake}
	notReady := errors.New("no worker is live")
	rs.ready.Store(&notReady)
	gauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: "scratchrun_cluster_test_gauge", Help: "A service's own gauge."})
	gauge.Set(7)
	ts := startServer(t, serverOptions{fake: fake, wrap: func(*execapitest.Service) execapi.Service { return rs },
		metrics: []prometheus.Collector{gauge}})
	a, err := ts.do(context.Background(), http.MethodGet, "/readyz", "", nil, nil)
	if err != nil || a.status != http.StatusServiceUnavailable || !strings.Contains(string(a.body), "no worker is live") {
		t.Errorf("/readyz while the service is not ready: %d %s %v", a.status, a.body, err)
	}
	rs.ready.Store(nil)
	if a, err = ts.do(context.Background(), http.MethodGet, "/readyz", "", nil, nil); err != nil || a.status != http.StatusOK {
		t.Errorf("/readyz once the service is ready: %d %s %v", a.status, a.body, err)
	}
	if n := len(fake.Calls()); n != 0 {
		t.Errorf("readiness ran %d probe calls; the service's own word should do", n)
	}
	if got := ts.metric("scratchrun_cluster_test_gauge"); got != 7 {
		t.Errorf("the service's gauge reads %v at /metrics, want 7", got)
	}
}
