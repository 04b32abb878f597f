package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/client"
	"github.com/scratchrun/scratchrun/internal/engine"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/httpapi"
	"github.com/scratchrun/scratchrun/internal/mcpserver"
	"github.com/scratchrun/scratchrun/internal/store"
	"github.com/scratchrun/scratchrun/internal/testenv"
	"github.com/scratchrun/scratchrun/internal/testenv/levels"
)

// Remote mode end to end: the MCP server holds this package's Service, which
// speaks HTTP on loopback to a real ScratchRun server (package httpapi, with
// real API keys in a real SQLite store) whose engine runs real sandboxes.

var (
	// The environment (directories of the binary's own, the image store,
	// the backend, the final leak check) is package testenv's.
	env     = testenv.New("mcpremote")
	nsLevel = env.Level("namespaces", levels.Namespaces)
	testEng *engine.Engine
)

func TestMain(m *testing.M) { env.Main(m) }

func localEngine(t *testing.T) *engine.Engine {
	t.Helper()
	if testEng != nil {
		return testEng
	}
	var err error
	testEng, err = engine.New(engine.DefaultConfig(), env.Store(t, "python3.13"), nsLevel.Backend(t))
	if err != nil {
		t.Fatal(err)
	}
	return testEng
}

// startServer runs a real ScratchRun HTTP server on 127.0.0.1 over the local
// engine, with one API key allowed one run per minute, and returns its URL
// and the key's secret.
func startServer(t *testing.T) (string, string) {
	t.Helper()
	eng := localEngine(t)
	keys, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "keys.db"))
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := keys.CreateKey(context.Background(), store.NewKey{Name: "mcp-remote-test", RatePerMin: 1, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := httpapi.New(httpapi.Config{Service: eng, Policy: eng.Policy(), Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, run last: the keys outlive the server.
	t.Cleanup(func() { keys.Close() })
	serverURL := testenv.ServeLoopback(t, srv.Serve)
	return serverURL, secret
}

// session connects an MCP client, over the SDK's in-memory transport, to an
// MCP server whose Service is the remote client of url.
func session(t *testing.T, url, key string) *mcp.ClientSession {
	t.Helper()
	return sessionWith(t, url, key, mcpserver.Options{}, nil)
}

func sessionWith(t *testing.T, url, key string, opts mcpserver.Options, copts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	opts.Redact = []string{key}
	server, err := mcpserver.New(ctx, New(url, key), opts)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, mcpserver.Transport(st), nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "remote-test", Version: "1"}, copts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

func callExec(t *testing.T, cs *mcp.ClientSession, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolName, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

var retryAfter = regexp.MustCompile(`Retry after (\d+) seconds?`)

// Success through the real server and engine (a chart comes back as a PNG),
// then the key's rate limit: a tool error that says when to retry, taken
// from the server's Retry-After.
func TestRemoteSuccessThenRateLimited(t *testing.T) {
	url, key := startServer(t)
	cs := session(t, url, key)

	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 1 {
		t.Fatalf("tools/list: %v", err)
	}
	if !strings.Contains(tools.Tools[0].Description, "python3.13 (version 3.13") {
		t.Errorf("the remote server's runtimes are not in the description:\n%s", tools.Tools[0].Description)
	}

	res := callExec(t, cs, map[string]any{
		"runtime":      "python3.13",
		"code":         "import matplotlib.pyplot as plt\nplt.plot([3, 1, 2])\nplt.savefig('/tmp/remote.png')\nprint('remote ok')",
		"return_files": []string{"/tmp/remote.png"},
	})
	if res.IsError || !strings.Contains(text(res), "remote ok") || len(res.Content) != 2 {
		t.Fatalf("remote call: %s", text(res))
	}
	img, ok := res.Content[1].(*mcp.ImageContent)
	if !ok || img.MIMEType != "image/png" || !bytes.HasPrefix(img.Data, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("no PNG image block from the remote run: %T", res.Content[1])
	}

	// One run per minute: the next call is refused with a Retry-After.
	res = callExec(t, cs, map[string]any{"runtime": "bash", "code": "echo again"})
	msg := text(res)
	m := retryAfter.FindStringSubmatch(msg)
	if !res.IsError || m == nil {
		t.Fatalf("second call within the minute: isError %v, %q; want a tool error saying when to retry", res.IsError, msg)
	}
	if secs, _ := strconv.Atoi(m[1]); secs < 1 || secs > 60 {
		t.Errorf("retry after %d seconds for a 1/min key", secs)
	}
	if strings.Contains(msg, key) {
		t.Error("the API key shows in the tool error")
	}

	// Validation errors from the server still name the tool's parameter.
	res = callExec(t, cs, map[string]any{"runtime": "bash", "code": "x", "timeout_ms": 999999})
	if msg := text(res); !res.IsError || !strings.Contains(msg, "Invalid argument timeout_ms") {
		t.Errorf("bad timeout_ms through the server: %q", msg)
	}
}

// In remote mode the run is streamed from the server: progress says it
// waits for the server until the server's sandbox runs the code (never
// "Starting a sandbox", which it cannot see), then shows the output as the
// code writes it. Before streaming it said it waited until the result.
func TestRemoteProgressShowsTheServersOutput(t *testing.T) {
	url, key := startServer(t)
	var mu sync.Mutex
	var messages []string
	cs := sessionWith(t, url, key, mcpserver.Options{ProgressInterval: 200 * time.Millisecond}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			messages = append(messages, req.Params.Message)
			mu.Unlock()
		},
	})
	params := &mcp.CallToolParams{Name: mcpserver.ToolName, Arguments: map[string]any{"runtime": "bash", "code": "echo first; sleep 2; echo done"}}
	params.SetProgressToken("remote")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil || res.IsError || !strings.Contains(text(res), "first\ndone") {
		t.Fatalf("call: %v %s", err, text(res))
	}
	mu.Lock()
	defer mu.Unlock()
	live := false
	for _, m := range messages {
		if !strings.HasPrefix(m, "Waiting for the server (") && !strings.HasPrefix(m, "Running for ") {
			t.Errorf("progress %q, want \"Waiting for the server (N s)\" or \"Running for ...\"", m)
		}
		live = live || strings.HasSuffix(m, "latest:\nfirst")
	}
	if !live {
		t.Errorf("no progress showed the output written 2 s before the end: %q", messages)
	}
}

func TestRemoteInvalidKey(t *testing.T) {
	url, _ := startServer(t)
	const wrong = "sr_live_not-a-key-the-server-knows-0123456789"
	cs := session(t, url, wrong)
	res := callExec(t, cs, map[string]any{"runtime": "bash", "code": "echo hi"})
	msg := text(res)
	if !res.IsError || !strings.Contains(msg, "invalid API key") || !strings.Contains(msg, url) {
		t.Errorf("call with a wrong key: isError %v, %q", res.IsError, msg)
	}
	tools, _ := cs.ListTools(context.Background(), nil)
	if strings.Contains(msg+tools.Tools[0].Description, wrong) {
		t.Error("the API key shows in a message")
	}
}

// A server that is not there: the MCP server still starts (runtimes unknown,
// the description says why), and a call is a tool error naming the URL.
func TestRemoteServerDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	cs := session(t, url, "sr_live_some-key-0123456789")
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || !strings.Contains(tools.Tools[0].Description, "Cannot reach the ScratchRun server at "+url) {
		t.Fatalf("tools/list with the server down: %v\n%s", err, tools.Tools[0].Description)
	}
	res := callExec(t, cs, map[string]any{"runtime": "bash", "code": "echo hi"})
	if msg := text(res); !res.IsError || !strings.Contains(msg, "Cannot reach the ScratchRun server at "+url) {
		t.Errorf("call with the server down: isError %v, %q", res.IsError, msg)
	}
}

// Under the worded message the cause stays visible to errors.Is/As, and
// the server's refusals pass through unchanged (the tool words them, as it
// does the local engine's: "Retry after 2 seconds").
func TestExplainKeepsTheCause(t *testing.T) {
	s := New("http://127.0.0.1:1", "k")
	refusal := &execapi.Refusal{Reason: execapi.RefusedKeyRate, RetryAfter: 1500 * time.Millisecond, Limit: 1}
	err := s.explain(context.Background(), refusal)
	var got *execapi.Refusal
	var te *mcpserver.ToolError
	if !errors.As(err, &got) || got != refusal || !strings.Contains(err.Error(), "Retry after 2 seconds") ||
		!errors.Is(err, execapi.ErrAtCapacity) || errors.As(err, &te) {
		t.Errorf("429: %v", err)
	}
	err = s.explain(context.Background(), &client.APIError{Status: 400, Code: "invalid_request", Message: "limits.memory_mb: is 1"})
	var ve *execapi.ValidationError
	if !errors.As(err, &ve) || ve.Field != "limits.memory_mb" || errors.As(err, &te) {
		t.Errorf("400: %v", err)
	}
}

// silentServer accepts connections and reads what comes, and never
// answers: a server that hangs. It returns its URL.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go io.Copy(io.Discard, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// A server that accepts and never answers fails the call once what the
// server may take by its limits (here the run's 1 s timeout) and the
// margin have passed, instead of hanging it: before these bounds the
// remote client had no timeout at all. Describe too gives up, after the
// margin.
func TestRemoteSilentServerFailsWithinItsBound(t *testing.T) {
	url := silentServer(t)
	s := New(url, "sr_live_some-key-0123456789", client.WithMargin(200*time.Millisecond))
	type outcome struct {
		what string
		err  error
	}
	done := make(chan outcome, 2)
	go func() {
		_, err := s.Describe(context.Background())
		done <- outcome{"Describe", err}
	}()
	go func() {
		_, err := s.Exec(context.Background(), execapi.Request{Runtime: "bash", Code: "echo hi", Limits: execapi.Limits{TimeoutMS: 1000}}, nil)
		done <- outcome{"Exec", err}
	}()
	for range 2 {
		select {
		case o := <-done:
			var te *mcpserver.ToolError
			if !errors.As(o.err, &te) || !strings.Contains(te.Message, "Cannot reach the ScratchRun server at "+url) ||
				!strings.Contains(te.Message, "no answer within") || !errors.Is(o.err, context.DeadlineExceeded) {
				t.Errorf("%s against a silent server: %v", o.what, o.err)
			}
		case <-time.After(30 * time.Second): // only catches the hang
			t.Fatal("a call to a server that never answers is still waiting")
		}
	}
}
