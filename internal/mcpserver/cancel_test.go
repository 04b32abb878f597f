package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/leakcheck"
)

// wireLog is a client-side transport that records every message the
// client receives, so that a test sees what the SDK's client hides (it
// drops a response to a call it retired).
type wireLog struct {
	mcp.Transport
	mu       sync.Mutex
	received []jsonrpc.Message
}

func (w *wireLog) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := w.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &wireLogConn{Connection: conn, log: w}, nil
}

type wireLogConn struct {
	mcp.Connection
	log *wireLog
}

func (c *wireLogConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err == nil {
		c.log.mu.Lock()
		c.log.received = append(c.log.received, msg)
		c.log.mu.Unlock()
	}
	return msg, err
}

// responses returns the IDs of the responses the client received.
func (w *wireLog) responses() []jsonrpc.ID {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ids []jsonrpc.ID
	for _, m := range w.received {
		if r, ok := m.(*jsonrpc.Response); ok {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// After the client cancels a call (notifications/cancelled), the server
// sends no response for it, as the MCP specification requires, and the
// sandbox is killed. go-sdk v1.8.0 alone sent the tool's result anyway.
func TestCancelledCallGetsNoResponse(t *testing.T) {
	rec := newRecording(testEngine(t))
	server, err := New(context.Background(), rec, Options{ProgressInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// handled reports each tools/call whose handler has returned, which is
	// when the SDK writes its response.
	handled := make(chan struct{}, 4)
	server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method == "tools/call" {
				handled <- struct{}{}
			}
			return res, err
		}
	})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(context.Background(), Transport(st), nil)
	if err != nil {
		t.Fatal(err)
	}
	wire := &wireLog{Transport: ct}
	plog := newProgressLog()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "cancel-test", Version: "1"},
		&mcp.ClientOptions{ProgressNotificationHandler: plog.handler}).Connect(context.Background(), wire, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cs.Close(); ss.Wait() }()
	before := leakcheck.Take(leakOpts)

	long := startLongCall(t, cs, plog)
	responsesBefore := len(wire.responses())
	long.cancelAndWait(t, rec)
	<-handled
	// A round trip after the handler returned: a response to the cancelled
	// call, had one been written, came before this one's.
	if err := cs.Ping(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if got := wire.responses()[responsesBefore:]; len(got) != 1 {
		t.Errorf("after the cancellation the client received %d responses %v, want only the ping's", len(got), got)
	}
	if left := leakcheck.WaitClean(before, leakOpts, 5*time.Second); len(left) > 0 {
		t.Errorf("the cancelled sandbox left behind:\n  %s", strings.Join(left, "\n  "))
	}

	// A call that is not cancelled still gets its result.
	res := call(t, cs, map[string]any{"runtime": "bash", "code": "echo after"})
	<-handled
	<-rec.returned
	if res.IsError || structured(t, res).Stdout != "after\n" {
		t.Errorf("the next call: %+v", res.Content)
	}
}

// longCall is a call of 25 s that reports progress, started by
// startLongCall.
type longCall struct {
	cancel context.CancelFunc
	done   <-chan error // what CallTool returned
}

// startLongCall starts a long call (progress token "cancel-me") and
// returns once its program reports running.
func startLongCall(t *testing.T, cs *mcp.ClientSession, plog *progressLog) *longCall {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	params := &mcp.CallToolParams{Name: ToolName, Arguments: map[string]any{
		"runtime": "bash", "code": "echo running; sleep 25; echo never", "timeout_ms": 30000,
	}}
	params.SetProgressToken("cancel-me")
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, params)
		done <- err
	}()
	waitForProgress(t, plog, "running")
	return &longCall{cancel: cancel, done: done}
}

// cancelAndWait cancels the call as the client does and waits for what
// that must do: CallTool ends with an error, and the Exec rec records ends
// with the cancellation, within 15 s (the program would run 25 s). It
// returns how long Exec took to end after the cancel.
func (c *longCall) cancelAndWait(t *testing.T, rec *recordingService) time.Duration {
	t.Helper()
	cancelled := time.Now()
	c.cancel()
	if err := <-c.done; err == nil {
		t.Fatal("cancelled call returned no error")
	}
	select {
	case err := <-rec.returned:
		if err == nil {
			t.Error("Exec of a cancelled call returned a result, want the cancellation")
		}
		return time.Since(cancelled)
	case <-time.After(15 * time.Second):
		t.Fatal("Exec did not return after the client cancelled")
		return 0
	}
}

// waitForProgress waits, up to 20 s, for a progress notification whose
// message shows text (the program's output).
func waitForProgress(t *testing.T, plog *progressLog, text string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case p := <-plog.seen:
			if strings.Contains(p.Message, text) {
				return
			}
		case <-deadline:
			t.Fatalf("no progress message showed %q", text)
		}
	}
}

// The same over Streamable HTTP, spoken raw (the SDK's client aborts its
// own request on cancel, so it would never see a late response): the POST
// that carried the call ends without a response event once the client
// cancels in another POST, and the sandbox is killed.
func TestCancelledCallGetsNoResponseOverHTTP(t *testing.T) {
	rec := newRecording(testEngine(t))
	srv := httptest.NewServer(HTTPHandler(rec, Options{ProgressInterval: 100 * time.Millisecond}))
	defer srv.Close()
	before := leakcheck.Take(leakOpts)

	session := ""
	post := func(body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode/100 != 2 {
			data, _ := io.ReadAll(resp.Body)
			t.Fatalf("POST %s: %d %s", body, resp.StatusCode, data)
		}
		return resp
	}
	init := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	session = init.Header.Get("Mcp-Session-Id")
	io.Copy(io.Discard, init.Body)
	init.Body.Close()
	if session == "" {
		t.Fatal("no session id")
	}
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()

	call := post(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"scratchrun_exec","_meta":{"progressToken":"p"},` +
		`"arguments":{"runtime":"bash","code":"echo in flight; sleep 25","timeout_ms":30000}}}`)
	defer call.Body.Close()
	events := make(chan map[string]any, 100)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(call.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				json.Unmarshal([]byte(data), &m)
				events <- m
			}
		}
	}()
	deadline := time.After(20 * time.Second)
	for running := false; !running; {
		select {
		case m := <-events:
			params, _ := m["params"].(map[string]any)
			msg, _ := params["message"].(string)
			running = strings.Contains(msg, "in flight")
		case <-deadline:
			t.Fatal("the run never showed progress")
		}
	}
	post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"test"}}`).Body.Close()
	select {
	case err := <-rec.returned:
		if err == nil {
			t.Error("Exec of a cancelled call returned a result")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Exec did not return after the client cancelled")
	}
	// The stream ends once the SDK has dealt with the call; nothing on it
	// may answer id 7.
	for {
		select {
		case m, ok := <-events:
			if !ok {
				if left := leakcheck.WaitClean(before, leakOpts, 5*time.Second); len(left) > 0 {
					t.Errorf("the cancelled sandbox left behind:\n  %s", strings.Join(left, "\n  "))
				}
				return
			}
			if m["id"] != nil {
				t.Fatalf("the cancelled call got a response: %v", m)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the call's stream did not end after the cancellation")
		}
	}
}
