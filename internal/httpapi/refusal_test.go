package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/client"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
	"github.com/scratchrun/scratchrun/internal/mcpserver"
	"github.com/scratchrun/scratchrun/internal/store"
)

// These run over the scripted service: they are about what the front ends
// make of refusals and outcomes, which no sandbox changes.

// holding is a service whose "hold" runs last until release is called (or
// their caller goes away); anything else succeeds at once.
func holding() (*execapitest.Service, func()) {
	fake := execapitest.New("bash", "python3.13")
	release := make(chan struct{})
	fake.Respond(func(_ context.Context, c execapitest.Call) execapitest.Response {
		if c.Checked.Code == "hold" {
			return execapitest.Response{Result: execapitest.Success("held\n"), Release: release}
		}
		return execapitest.Response{Result: execapitest.Success("ok\n")}
	})
	var once sync.Once
	return fake, func() { once.Do(func() { close(release) }) }
}

const holdBody = `{"runtime": "bash", "code": "hold"}`
const quickBody = `{"runtime": "bash", "code": "true"}`

// bearerKey adds an API key to every request of an MCP client.
type bearerKey string

func (k bearerKey) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if k != "" {
		r.Header.Set("Authorization", "Bearer "+string(k))
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession connects an MCP client to the server's /mcp with key.
func (ts *testServer) mcpSession(key string) *mcp.ClientSession {
	ts.t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "httpapi-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearerKey(key)}, MaxRetries: -1}, nil)
	if err != nil {
		ts.t.Fatalf("connect to /mcp: %v", err)
	}
	ts.t.Cleanup(func() { cs.Close() })
	return cs
}

// toolCall calls scratchrun_exec and returns the result's first text and
// whether it is a tool error.
func toolCall(t *testing.T, cs *mcp.ClientSession, code string) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: mcpserver.ToolName,
		Arguments: map[string]any{"runtime": "bash", "code": code}})
	if err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	return res.Content[0].(*mcp.TextContent).Text, res.IsError
}

// refusedAs checks a refusal's HTTP answer: status, code, reason, the key's
// limit and Retry-After as its words say; it returns the words.
func refusedAs(t *testing.T, a answer, status int, reason execapi.RefusalReason, limit int) string {
	t.Helper()
	var doc ErrorDocument
	if err := json.Unmarshal(a.body, &doc); err != nil || a.status != status || doc.Error.Reason != string(reason) || doc.Error.Limit != limit {
		t.Fatalf("want %d with reason %s and limit %d, got %d %s", status, reason, limit, a.status, a.body)
	}
	if secs := a.header.Get("Retry-After"); secs != "" {
		n, _ := strconv.Atoi(secs)
		want := "Retry after " + secs + " seconds"
		if n == 1 {
			want = "Retry after 1 second"
		}
		if !strings.HasSuffix(doc.Error.Message, want) {
			t.Errorf("%s: Retry-After %s but the message says %q", reason, secs, doc.Error.Message)
		}
	}
	return doc.Error.Message
}

// Each refusal of the gate reads the same over HTTP and over MCP: the HTTP
// answer carries its status, code, reason and Retry-After and its one
// wording; the MCP tool error is that wording, framed. Before, the MCP
// adapter said "ScratchRun is at capacity: every sandbox is busy" for every
// one of them unless `serve` wrapped the gate to reword it (rejectionWords),
// and the remote adapter had wordings of its own.
func TestRefusalsReadTheSameOverHTTPAndMCP(t *testing.T) {
	framed := func(words string) string { return "ScratchRun refused the call: " + words + "." }
	t.Run("key_rate", func(t *testing.T) {
		fake, _ := holding()
		ts := startServer(t, serverOptions{mcp: true, fake: fake})
		_, a := ts.key("a", 1, 4)
		_, b := ts.key("b", 1, 4)
		ts.post(a, quickBody)
		words := refusedAs(t, ts.post(a, quickBody), 429, execapi.RefusedKeyRate, 1)
		// Opening the session spends b's one run a minute (AdmitSession).
		cs := ts.mcpSession(b)
		if text, isErr := toolCall(t, cs, "true"); !isErr || text != framed(words) {
			t.Errorf("MCP: %q, want %q", text, framed(words))
		}
	})
	t.Run("key_concurrency", func(t *testing.T) {
		fake, release := holding()
		defer release()
		ts := startServer(t, serverOptions{mcp: true, fake: fake})
		_, a := ts.key("a", 100, 1)
		_, b := ts.key("b", 100, 1)
		go ts.post(a, holdBody)
		cs := ts.mcpSession(b)
		go cs.CallTool(context.Background(), &mcp.CallToolParams{Name: mcpserver.ToolName, Arguments: map[string]any{"runtime": "bash", "code": "hold"}})
		waitFor(t, "both held", func() bool { return fake.InFlight() == 2 })
		words := refusedAs(t, ts.post(a, quickBody), 429, execapi.RefusedKeyConcurrency, 1)
		if text, isErr := toolCall(t, cs, "true"); !isErr || text != framed(words) {
			t.Errorf("MCP: %q, want %q", text, framed(words))
		}
	})
	t.Run("queue_full", func(t *testing.T) {
		sb, release := scriptedBackend()
		defer release()
		ts := startServer(t, serverOptions{mcp: true, capacity: 1, maxQueue: 1, queueWait: time.Minute, backend: sb})
		go ts.post("", holdBody)
		waitFor(t, "held", func() bool { return ts.eng.Admission().Running == 1 })
		go ts.post("", quickBody)
		waitFor(t, "queued", func() bool { return ts.eng.Admission().Waiting == 1 })
		cs := ts.mcpSession("")
		words := refusedAs(t, ts.post("", quickBody), 429, execapi.RefusedQueueFull, 0)
		if text, isErr := toolCall(t, cs, "true"); !isErr || text != framed(words) {
			t.Errorf("MCP: %q, want %q", text, framed(words))
		}
	})
	t.Run("at_capacity", func(t *testing.T) {
		sb, release := scriptedBackend()
		defer release()
		ts := startServer(t, serverOptions{mcp: true, capacity: 1, queueWait: -1, backend: sb})
		go ts.post("", holdBody)
		waitFor(t, "held", func() bool { return ts.eng.Admission().Running == 1 })
		cs := ts.mcpSession("")
		words := refusedAs(t, ts.post("", quickBody), 429, execapi.RefusedAtCapacity, 0)
		if text, isErr := toolCall(t, cs, "true"); !isErr || text != framed(words) {
			t.Errorf("MCP: %q, want %q", text, framed(words))
		}
	})
	t.Run("unknown_runtime", func(t *testing.T) {
		fake, _ := holding()
		ts := startServer(t, serverOptions{mcp: true, fake: fake})
		words := refusedAs(t, ts.post("", `{"runtime": "cobol", "code": "x"}`), 400, execapi.RefusedUnknownRuntime, 0)
		res, err := ts.mcpSession("").CallTool(context.Background(), &mcp.CallToolParams{Name: mcpserver.ToolName,
			Arguments: map[string]any{"runtime": "cobol", "code": "x"}})
		// A refusal about a field reads as the tool's other bad arguments.
		if err != nil || !res.IsError || res.Content[0].(*mcp.TextContent).Text != "Invalid argument "+words {
			t.Errorf("MCP: %+v %v, want %q", res, err, "Invalid argument "+words)
		}
	})
	t.Run("draining", func(t *testing.T) {
		fake, release := holding()
		ts := startServer(t, serverOptions{mcp: true, fake: fake})
		go ts.post("", holdBody)
		waitFor(t, "held", func() bool { return fake.InFlight() == 1 })
		// The MCP front end the server mounts holds the gate, as this one.
		server, err := mcpserver.New(context.Background(), ts.srv.Service(), mcpserver.Options{})
		if err != nil {
			t.Fatal(err)
		}
		st, ct := mcp.NewInMemoryTransports()
		ss, err := server.Connect(context.Background(), mcpserver.Transport(st), nil)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "drain-test", Version: "1"}, nil).Connect(context.Background(), ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { cs.Close(); ss.Wait() }()
		ts.cancel()
		waitFor(t, "draining", func() bool { return ts.srv.drain.isDraining() })
		words := refusedAs(t, ts.post("", quickBody), 503, execapi.RefusedDraining, 0)
		if text, isErr := toolCall(t, cs, "true"); !isErr || text != framed(words) {
			t.Errorf("MCP: %q, want %q", text, framed(words))
		}
		release()
	})
}

// The Go client (the remote Executor) turns every refusal the server
// answers with back into the refusal the server had, so that a front end
// over it (the remote MCP tool, a cluster's) passes it on unchanged: same
// reason, limit, field and words, Retry-After in the whole seconds the
// header carries. A reason this client does not know yet comes back too.
func TestClientRoundTripsEveryRefusal(t *testing.T) {
	refusals := map[string]*execapi.Refusal{
		"at_capacity":     {Reason: execapi.RefusedAtCapacity, RetryAfter: 2300 * time.Millisecond},
		"queue_full":      {Reason: execapi.RefusedQueueFull, RetryAfter: 5 * time.Second},
		"key_rate":        {Reason: execapi.RefusedKeyRate, RetryAfter: 29 * time.Second, Limit: 2},
		"key_concurrency": {Reason: execapi.RefusedKeyConcurrency, RetryAfter: time.Second, Limit: 4},
		"draining":        {Reason: execapi.RefusedDraining},
		"unknown_runtime": {Reason: execapi.RefusedUnknownRuntime, Field: "runtime", Detail: `runtime "cobol" is not installed: no such runtime; installed runtimes: bash`},
		"memory":          {Reason: execapi.RefusedMemory, RetryAfter: 3 * time.Second},
		"cpu":             {Reason: execapi.RefusedCPU, RetryAfter: 1200 * time.Millisecond},
		"future":          {Reason: "gpu", RetryAfter: 4 * time.Second},
	}
	fake := execapitest.New("bash")
	fake.Respond(func(_ context.Context, c execapitest.Call) execapitest.Response {
		return execapitest.Response{Err: refusals[c.Checked.Code]}
	})
	ts := startServer(t, serverOptions{fake: fake})
	c := client.New(ts.URL, "", client.WithoutRetries())
	for name, want := range refusals {
		_, err := c.Run(context.Background(), client.Request{Runtime: "bash", Code: name})
		var got *execapi.Refusal
		if !errors.As(err, &got) {
			t.Errorf("%s: %v (%T), want a *execapi.Refusal", name, err, err)
			continue
		}
		exact := *want
		if want.RetryAfter > 0 {
			exact.RetryAfter = time.Duration(want.RetryAfterSeconds()) * time.Second
		}
		if !reflect.DeepEqual(*got, exact) || got.Error() != want.Error() {
			t.Errorf("%s: came back as %+v (%q)\nwant %+v (%q)", name, *got, got, exact, want)
		}
	}
}

// Usage rows and metrics count each run by the outcome the service gave
// it, whatever its note says; calls that produced no result are
// "cancelled" or "error". The MCP tool shows the same outcome.
func TestOutcomeInUsageRowsAndMetrics(t *testing.T) {
	fake := execapitest.New("bash")
	release := make(chan struct{})
	defer close(release)
	fake.Respond(func(_ context.Context, c execapitest.Call) execapitest.Response {
		switch c.Checked.Code {
		case "timeout":
			return execapitest.Response{Result: execapitest.Exit(execapi.ExitTimeout, "", execapi.Facts{TimedOut: true, TimeoutMS: 1000})}
		case "oom":
			return execapitest.Response{Result: execapitest.Exit(execapi.ExitKilled, "", execapi.Facts{MemoryLimitHit: true, MemoryMB: 64})}
		case "fail":
			return execapitest.Response{Result: execapitest.Exit(3, "", execapi.Facts{})}
		case "worded":
			r := execapitest.Exit(execapi.ExitTimeout, "", execapi.Facts{SandboxNotes: []string{"Return file /tmp/timeout was not returned."}})
			return execapitest.Response{Result: r}
		case "broken":
			return execapitest.Response{Err: errors.New("sandbox init ended without a result")}
		case "hang":
			return execapitest.Response{Release: release}
		}
		return execapitest.Response{Result: execapitest.Success("")}
	})
	ts := startServer(t, serverOptions{mcp: true, fake: fake})
	k, key := ts.key("alice", 1000, 4)
	want := map[string]string{"ok": "success", "timeout": "timeout", "oom": "memory_limit", "fail": "nonzero_exit",
		"worded": "nonzero_exit", "broken": "error", "hang": "cancelled"}
	for _, code := range []string{"ok", "timeout", "oom", "fail", "worded", "broken"} {
		ts.post(key, `{"runtime": "bash", "code": "`+code+`"}`)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		waitFor(t, "the hanging run", func() bool { return fake.InFlight() == 1 })
		cancel()
	}()
	ts.do(ctx, http.MethodPost, "/v1/exec", key, strings.NewReader(`{"runtime": "bash", "code": "hang"}`), nil)
	var rows []store.Usage
	waitFor(t, "seven usage rows", func() bool {
		rows, _ = ts.keys.ListUsage(context.Background(), store.UsageFilter{KeyIDs: []string{k.ID}})
		return len(rows) == 7
	})
	calls := fake.Calls()
	for i, u := range rows {
		code := calls[i].Checked.Code
		if u.Outcome != want[code] {
			t.Errorf("%s: usage outcome %q, want %q", code, u.Outcome, want[code])
		}
	}
	for outcome, n := range map[string]float64{"success": 1, "timeout": 1, "memory_limit": 1, "nonzero_exit": 2, "error": 1, "cancelled": 1} {
		if got := ts.metric(`scratchrun_runs_total{outcome="` + outcome + `",runtime="bash"}`); got != n {
			t.Errorf("%s runs counted %v, want %v", outcome, got, n)
		}
	}
	res, err := ts.mcpSession(key).CallTool(context.Background(), &mcp.CallToolParams{Name: mcpserver.ToolName,
		Arguments: map[string]any{"runtime": "bash", "code": "timeout"}})
	if err != nil || res.IsError {
		t.Fatalf("MCP call: %v %+v", err, res)
	}
	data, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(data), `"outcome":"timeout"`) || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "outcome: timeout") {
		t.Errorf("the MCP result does not show the outcome: %s", data)
	}
}

// The API's routes answer their own methods; other methods get a 405 in
// the API's error document with Allow (after the key check, like the
// route), and unknown paths a 404 in it.
func TestRoutesAnswerOtherMethodsInTheAPIShape(t *testing.T) {
	ts := startServer(t, serverOptions{fake: scripted()})
	_, key := ts.key("alice", 100, 4)
	auth := map[string]string{"Authorization": "Bearer " + key}
	for _, c := range []struct{ method, path, allow string }{
		{"GET", "/v1/exec", "POST"}, {"PUT", "/v1/exec", "POST"}, {"POST", "/v1/runtimes", "GET"}, {"DELETE", "/v1/runtimes", "GET"},
	} {
		a := ts.request(t, c.method, c.path, "", auth)
		if a.status != http.StatusMethodNotAllowed || a.header.Get("Allow") != c.allow || a.errorBody(t).Code != CodeMethodNotAllowed {
			t.Errorf("%s %s: %d Allow %q %s", c.method, c.path, a.status, a.header.Get("Allow"), a.body)
		}
		if a := ts.request(t, c.method, c.path, "", nil); a.status != http.StatusUnauthorized {
			t.Errorf("%s %s without a key: %d, want 401 first", c.method, c.path, a.status)
		}
	}
	if a := ts.request(t, "HEAD", "/v1/runtimes", "", auth); a.status != http.StatusOK {
		t.Errorf("HEAD /v1/runtimes: %d", a.status)
	}
	for _, path := range []string{"/v2/exec", "/v1/exec/more", "/v1"} {
		if a := ts.request(t, "GET", path, "", auth); a.status != http.StatusNotFound || a.errorBody(t).Code != CodeNotFound {
			t.Errorf("GET %s: %d %s", path, a.status, a.body)
		}
	}
}

// The server validates with the engine's own policy, given as a value: a
// Config without one, or with another, is refused at New (a checked request
// would otherwise reach the engine past limits it does not hold).
func TestNewNeedsTheEnginesPolicy(t *testing.T) {
	fake := execapitest.New("bash")
	keys, err := store.Open(context.Background(), t.TempDir()+"/keys.db")
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	other := fake.Policy()
	other.MaxMemoryMB = 1024
	for _, p := range []execapi.Policy{{}, other} {
		if _, err := New(Config{Service: fake, Policy: p, Keys: keys}); err == nil || !strings.Contains(err.Error(), "Policy") {
			t.Errorf("policy %+v: %v", p, err)
		}
	}
	if _, err := New(Config{Service: fake, Policy: fake.Policy(), Keys: keys}); err != nil {
		t.Errorf("the engine's policy: %v", err)
	}
}
