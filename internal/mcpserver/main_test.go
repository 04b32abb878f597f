package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/engine"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
	"github.com/scratchrun/scratchrun/internal/testenv"
	"github.com/scratchrun/scratchrun/internal/testenv/levels"
)

// These tests speak MCP through the SDK's own client, over its in-memory
// transport (and Streamable HTTP on loopback), to a server whose Service is
// the real engine running real sandboxes on the installed images (missing
// images fail the tests), or, for what the adapter alone decides (argument
// decoding, the tool's definition, a Service that comes and goes), a
// scripted one (fakeService) that needs neither root nor images.

var (
	// The environment (directories of the binary's own, the image store,
	// the backend, the final leak check) is package testenv's.
	env      = testenv.New("mcpserver")
	nsLevel  = env.Level("namespaces", levels.Namespaces)
	leakOpts = nsLevel.Leak

	engineOnce sync.Once
	testEng    *engine.Engine
)

func TestMain(m *testing.M) { env.Main(m) }

// testEngine is the real local engine, shared by the package's tests.
func testEngine(t testing.TB) *engine.Engine {
	t.Helper()
	// Skipped before the Once: a skip inside it would leave no engine for
	// the full tier's later tests to share.
	testenv.SkipIfShort(t, "runs the real engine, as root, on the installed images")
	engineOnce.Do(func() {
		store := env.Store(t, "python3.13", "python3.11", "node20", "bash")
		var err error
		if testEng, err = engine.New(engine.DefaultConfig(), store, nsLevel.Backend(t)); err != nil {
			t.Fatal(err)
		}
	})
	if testEng == nil {
		t.Fatal("the shared engine could not be made (see the first test that failed)")
	}
	return testEng
}

// fakeService is a scripted Service offering the runtimes the real engine
// is tested with; "echo WORDS" prints WORDS, anything else succeeds.
func fakeService() *execapitest.Service {
	fake := execapitest.New("python3.13", "python3.11", "node20", "bash")
	fake.Respond(func(_ context.Context, c execapitest.Call) execapitest.Response {
		out, _ := strings.CutPrefix(c.Checked.Code, "echo ")
		if out != c.Checked.Code {
			out += "\n"
		} else {
			out = ""
		}
		return execapitest.Response{Result: execapitest.Success(out)}
	})
	return fake
}

// connect starts a server over svc and returns a client session to it over
// the SDK's in-memory transport.
func connect(t testing.TB, svc execapi.Service, opts Options, copts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	server, err := New(ctx, svc, opts)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, Transport(st), nil)
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpserver-test", Version: "1"}, copts)
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

// call calls scratchrun_exec with args and fails the test on a protocol error.
func call(t testing.TB, cs *mcp.ClientSession, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolName, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	return res
}

// structured decodes a result's structuredContent as the client received it.
func structured(t testing.TB, res *mcp.CallToolResult) structuredResult {
	t.Helper()
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var sr structuredResult
	if err := json.Unmarshal(data, &sr); err != nil {
		t.Fatalf("structuredContent %s: %v", data, err)
	}
	return sr
}

func textOf(t testing.TB, c mcp.Content) string {
	t.Helper()
	tc, ok := c.(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want text", c)
	}
	return tc.Text
}

// errorText returns the text of a tool error, failing when res is not one.
func errorText(t testing.TB, res *mcp.CallToolResult) string {
	t.Helper()
	if !res.IsError {
		t.Fatalf("want a tool error (isError), got a result: %+v", res.Content)
	}
	if len(res.Content) != 1 {
		t.Fatalf("tool error has %d content blocks", len(res.Content))
	}
	return textOf(t, res.Content[0])
}

// recordingService wraps a real Service to record, for tests, what reached
// it: the callers and when each Exec returned.
type recordingService struct {
	execapi.Service
	mu       sync.Mutex
	callers  []string
	requests []execapi.Request
	returned chan error
}

func newRecording(svc execapi.Service) *recordingService {
	return &recordingService{Service: svc, returned: make(chan error, 16)}
}

func (r *recordingService) Exec(ctx context.Context, req execapi.Request, ev execapi.EventSink) (execapi.Result, error) {
	r.mu.Lock()
	r.callers = append(r.callers, execapi.CallerFrom(ctx))
	r.requests = append(r.requests, req)
	r.mu.Unlock()
	res, err := r.Service.Exec(ctx, req, ev)
	r.returned <- err
	return res, err
}

func (r *recordingService) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.requests)
}
