package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/testenv/golden"
)

// These tests drive the code-session tools through the SDK's client over
// the in-memory transport, on fakeSessions (our own SessionService).

func tinyPNG() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	img.Set(1, 1, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// callTool calls the named tool and fails the test on a protocol error.
func callTool(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

// decodeInto decodes a result's structuredContent as the client received it.
func decodeInto(t testing.TB, res *mcp.CallToolResult, v any) {
	t.Helper()
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("structuredContent %s: %v", data, err)
	}
}

// openSession opens a session through the tool and returns its id.
func openSession(t testing.TB, cs *mcp.ClientSession, args map[string]any) string {
	t.Helper()
	res := callTool(t, cs, SessionOpenToolName, args)
	if res.IsError {
		t.Fatalf("open: %s", textOf(t, res.Content[0]))
	}
	var so sessionOpened
	decodeInto(t, res, &so)
	if !execapi.IsSessionID(so.SessionID) {
		t.Fatalf("open returned id %q", so.SessionID)
	}
	return so.SessionID
}

// With sessions on, the offer gains the three session tools and a sentence
// of instructions, held byte for byte by golden files; scratchrun_exec in it
// is byte for byte the tool offered with sessions off.
func TestSessionToolsListedWhenOn(t *testing.T) {
	srv := httptest.NewServer(HTTPHandler(newFakeSessions(true), Options{Version: "golden"}))
	defer srv.Close()
	initialize, tools := golden.MCPOffer(t, srv.URL)
	golden.JSON(t, "testdata/initialize_sessions_on.json", initialize)
	golden.JSON(t, "testdata/tools_list_sessions_on.json", tools)

	offSrv := httptest.NewServer(HTTPHandler(fakeService(), Options{Version: "golden"}))
	defer offSrv.Close()
	_, offTools := golden.MCPOffer(t, offSrv.URL)
	execOf := func(raw json.RawMessage) (json.RawMessage, []string) {
		var list struct {
			Tools []json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			t.Fatal(err)
		}
		var exec json.RawMessage
		var names []string
		for _, tl := range list.Tools {
			var n struct{ Name string }
			json.Unmarshal(tl, &n)
			names = append(names, n.Name)
			if n.Name == ToolName {
				exec = tl
			}
		}
		return exec, names
	}
	onExec, names := execOf(tools)
	offExec, _ := execOf(offTools)
	if !bytes.Equal(onExec, offExec) {
		t.Errorf("scratchrun_exec changed with sessions on:\n%s\nwant\n%s", onExec, offExec)
	}
	want := []string{ToolName, SessionCloseToolName, SessionOpenToolName, SessionRunToolName}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("tools %v, want %v", names, want)
	}
	var init struct{ Instructions string }
	json.Unmarshal(initialize, &init)
	if !strings.HasPrefix(init.Instructions, serverInstructions) || !strings.Contains(init.Instructions, SessionOpenToolName) {
		t.Errorf("instructions with sessions on: %q", init.Instructions)
	}
}

// A Service that holds sessions but whose operator left them off offers
// exactly what a Service without sessions offers (the golden files of
// sessions off).
func TestSessionToolsOffWhenPolicyOff(t *testing.T) {
	srv := httptest.NewServer(HTTPHandler(newFakeSessions(false), Options{Version: "golden"}))
	defer srv.Close()
	initialize, tools := golden.MCPOffer(t, srv.URL)
	golden.JSON(t, "testdata/initialize_sessions_off.json", initialize)
	golden.JSON(t, "testdata/tools_list_sessions_off.json", tools)
}

// The descriptions carry the operator's idle TTL and lifetime, so that a
// model knows when state is gone, and say scratchrun_exec stays fresh.
func TestSessionDescriptionsSayWhenStateIsGone(t *testing.T) {
	svc := newFakeSessions(true)
	svc.policy.IdleTTL, svc.policy.MaxLifetime = 7*time.Minute, 2*time.Hour
	cs := connect(t, svc, Options{}, nil)
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range list.Tools {
		switch tl.Name {
		case SessionOpenToolName, SessionRunToolName:
			for _, want := range []string{"7 minutes after its last call", "2 hours after it opened"} {
				if !strings.Contains(tl.Description, want) {
					t.Errorf("%s's description lacks %q:\n%s", tl.Name, want, tl.Description)
				}
			}
		}
		if tl.Name == SessionOpenToolName && !strings.Contains(tl.Description, ToolName+" is unchanged: every call of it is still a fresh sandbox") {
			t.Errorf("open's description does not say scratchrun_exec stays fresh:\n%s", tl.Description)
		}
	}
}

// State set in one call is there in the next; each result has
// scratchrun_exec's shape plus the session's id, expiry and interpreter.
func TestSessionStatePersistsAcrossRuns(t *testing.T) {
	svc := newFakeSessions(true)
	cs := connect(t, svc, Options{}, nil)
	id := openSession(t, cs, map[string]any{"runtime": "python3.13", "idle_ttl_ms": 60000})

	res := callTool(t, cs, SessionRunToolName, map[string]any{"session_id": id, "code": "set x=42"})
	var first sessionRunStructured
	decodeInto(t, res, &first)
	if res.IsError || first.Session.Interpreter != execapi.InterpreterStarted || first.StatePurged {
		t.Fatalf("first call: %+v %+v", res.Content, first)
	}
	res = callTool(t, cs, SessionRunToolName, map[string]any{"session_id": id, "code": "get x"})
	var second sessionRunStructured
	decodeInto(t, res, &second)
	if second.Stdout != "42\n" || second.Session.Interpreter != execapi.InterpreterKept || second.Session.SessionID != id {
		t.Errorf("second call: %+v", second)
	}
	if want := stamp(svc.now.Add(time.Minute)); second.Session.ExpiresAt != want {
		t.Errorf("expires_at %q, want %q", second.Session.ExpiresAt, want)
	}
	text := textOf(t, res.Content[0])
	for _, want := range []string{"session_id: " + id, "session_expires_at: ", "interpreter: kept", "exit_code: 0", "--- stdout ---\n42"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	// The call had the session's settings and its own timeout.
	c := svc.lastChecked()
	if c.Runtime != "python3.13" || c.Network != execapi.NetworkNone || c.Timeout != execapi.DefaultPolicy().DefaultTimeout {
		t.Errorf("checked call: %+v", c)
	}
}

// A call that ends its session (its memory limit) says so in the text and
// structuredContent, with state_purged the session's teardown; the next
// use is told why the session ended.
func TestSessionEndedByACall(t *testing.T) {
	cs := connect(t, newFakeSessions(true), Options{}, nil)
	id := openSession(t, cs, map[string]any{"runtime": "python3.13"})
	res := callTool(t, cs, SessionRunToolName, map[string]any{"session_id": id, "code": "oom"})
	var sr sessionRunStructured
	decodeInto(t, res, &sr)
	if res.IsError || sr.ExitCode != 137 || !sr.Session.Ended || !sr.StatePurged || !strings.Contains(sr.Note, "The session has ended") {
		t.Fatalf("the call that ended the session: %+v", sr)
	}
	if text := textOf(t, res.Content[0]); !strings.Contains(text, "session: ended with this call") {
		t.Errorf("text: %s", text)
	}
	msg := errorText(t, callTool(t, cs, SessionRunToolName, map[string]any{"session_id": id, "code": "echo"}))
	if !strings.Contains(msg, "its processes reached its memory limit") {
		t.Errorf("next use: %s", msg)
	}
}

// Images come back as image content, as scratchrun_exec's do.
func TestSessionRunReturnsImages(t *testing.T) {
	cs := connect(t, newFakeSessions(true), Options{}, nil)
	id := openSession(t, cs, map[string]any{"runtime": "python3.13"})
	res := callTool(t, cs, SessionRunToolName, map[string]any{"session_id": id, "code": "png /tmp/c.png", "return_files": []string{"/tmp/c.png"}})
	if res.IsError || len(res.Content) != 2 {
		t.Fatalf("result: %+v", res.Content)
	}
	img, ok := res.Content[1].(*mcp.ImageContent)
	if !ok || img.MIMEType != "image/png" || !bytes.HasPrefix(img.Data, pngMagic) {
		t.Fatalf("content[1] is %T %+v, want a PNG image", res.Content[1], res.Content[1])
	}
	var sr sessionRunStructured
	decodeInto(t, res, &sr)
	if rep := sr.Files["/tmp/c.png"]; rep.ReturnedAs != "image" || rep.ContentIndex == nil || *rep.ContentIndex != 1 {
		t.Errorf("file report %+v", rep)
	}
}

// Close reports state_purged; the session's next use is told it ended.
func TestSessionCloseReportsPurge(t *testing.T) {
	cs := connect(t, newFakeSessions(true), Options{}, nil)
	id := openSession(t, cs, map[string]any{"runtime": "bash"})
	res := callTool(t, cs, SessionCloseToolName, map[string]any{"session_id": id})
	var sc sessionClosed
	decodeInto(t, res, &sc)
	if res.IsError || !sc.StatePurged || sc.Reason != string(execapi.EndDeleted) || sc.SessionID != id {
		t.Fatalf("close: %+v %+v", res.Content, sc)
	}
	if text := textOf(t, res.Content[0]); !strings.Contains(text, "state_purged: true") {
		t.Errorf("close text: %s", text)
	}
	msg := errorText(t, callTool(t, cs, SessionRunToolName, map[string]any{"session_id": id, "code": "echo hi"}))
	if !strings.Contains(msg, "The session has ended: it was closed") || !strings.Contains(msg, "(session_ended)") {
		t.Errorf("run after close: %s", msg)
	}
}

// Tool errors are isError results a model can act on: the field named for
// bad arguments, and the contract's words for a session that is unknown,
// another caller's, ended or lost.
func TestSessionToolErrors(t *testing.T) {
	svc := newFakeSessions(true)
	cs := connect(t, svc, Options{}, nil)
	id := openSession(t, cs, map[string]any{"runtime": "python3.13"})
	ended := openSession(t, cs, map[string]any{"runtime": "python3.13"})
	svc.end(ended, execapi.EndIdleTTL)
	lost := openSession(t, cs, map[string]any{"runtime": "python3.13"})
	svc.lose(lost)
	unknown := execapi.NewSessionID()

	cases := []struct {
		name string
		tool string
		args map[string]any
		want string
	}{
		{"open without runtime", SessionOpenToolName, map[string]any{}, "Invalid argument runtime"},
		{"open unknown parameter", SessionOpenToolName, map[string]any{"runtime": "bash", "code": "x"}, "Invalid argument code: is not a parameter of scratchrun_session_open"},
		{"open memory over the maximum", SessionOpenToolName, map[string]any{"runtime": "bash", "memory_mb": 999999}, "Invalid argument memory_mb"},
		{"open idle ttl too short", SessionOpenToolName, map[string]any{"runtime": "bash", "idle_ttl_ms": 5}, "Invalid argument idle_ttl_ms"},
		{"open idle ttl zero", SessionOpenToolName, map[string]any{"runtime": "bash", "idle_ttl_ms": 0}, "Invalid argument idle_ttl_ms"},
		{"run without session_id", SessionRunToolName, map[string]any{"code": "echo"}, "Invalid argument session_id: is missing"},
		{"run without code", SessionRunToolName, map[string]any{"session_id": id}, "Invalid argument code: is missing"},
		{"run with network", SessionRunToolName, map[string]any{"session_id": id, "code": "echo", "network": "none"}, "Invalid argument network: is not a parameter of scratchrun_session_run"},
		{"run timeout below minimum", SessionRunToolName, map[string]any{"session_id": id, "code": "echo", "timeout_ms": 1}, "Invalid argument timeout_ms"},
		{"run session_id not a string", SessionRunToolName, map[string]any{"session_id": 7, "code": "echo"}, "Invalid argument session_id: must be a string"},
		{"run malformed id", SessionRunToolName, map[string]any{"session_id": "ses_nope", "code": "echo"}, "No such session"},
		{"run unknown id", SessionRunToolName, map[string]any{"session_id": unknown, "code": "echo"}, "No such session"},
		{"run ended", SessionRunToolName, map[string]any{"session_id": ended, "code": "echo"}, "The session has ended: no call came within its idle TTL"},
		{"run lost", SessionRunToolName, map[string]any{"session_id": lost, "code": "echo"}, "The session was lost with its worker"},
		{"close unknown", SessionCloseToolName, map[string]any{"session_id": unknown}, "No such session"},
		{"close lost", SessionCloseToolName, map[string]any{"session_id": lost}, "(session_lost)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if msg := errorText(t, callTool(t, cs, tc.tool, tc.args)); !strings.Contains(msg, tc.want) {
				t.Errorf("error %q, want it to contain %q", msg, tc.want)
			}
		})
	}
}

// The key's maximum of sessions is a refusal in its own words.
func TestSessionOpenRefusedAtKeyMaximum(t *testing.T) {
	svc := newFakeSessions(true)
	svc.policy.PerKey = 1
	cs := connect(t, svc, Options{}, nil)
	openSession(t, cs, map[string]any{"runtime": "bash"})
	msg := errorText(t, callTool(t, cs, SessionOpenToolName, map[string]any{"runtime": "bash"}))
	if !strings.HasPrefix(msg, "ScratchRun refused the call: ") {
		t.Errorf("refusal: %s", msg)
	}
}

// A call in a session reports progress with its output, as
// scratchrun_exec's does, and the client's cancellation reaches the
// Service's call (which kills its processes) with no response sent.
func TestSessionRunProgressAndCancel(t *testing.T) {
	svc := newFakeSessions(true)
	plog := newProgressLog()
	cs := connect(t, svc, Options{ProgressInterval: 10 * time.Millisecond}, &mcp.ClientOptions{ProgressNotificationHandler: plog.handler})
	id := openSession(t, cs, map[string]any{"runtime": "bash"})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	params := &mcp.CallToolParams{Name: SessionRunToolName, Arguments: map[string]any{"session_id": id, "code": "wait"}}
	params.SetProgressToken("session-run")
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, params)
		done <- err
	}()
	waitForProgress(t, plog, "running")
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled call returned no error")
	}
	select {
	case err := <-svc.cancelled:
		if err == nil {
			t.Error("the Service's call was not cancelled")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the client's cancellation did not reach the Service's call")
	}
	for _, p := range plog.all() {
		if p.ProgressToken != "session-run" {
			t.Errorf("progress for token %v", p.ProgressToken)
		}
	}
	// The session goes on.
	res := callTool(t, cs, SessionRunToolName, map[string]any{"session_id": id, "code": "echo after"})
	var sr sessionRunStructured
	decodeInto(t, res, &sr)
	if res.IsError || sr.Stdout != "after\n" {
		t.Errorf("after the cancel: %+v", res.Content)
	}
}
