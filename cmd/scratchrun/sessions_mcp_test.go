//go:build linux

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// toolNames is what tools/list offers, sorted.
func toolNames(t *testing.T, ctx context.Context, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// callSessionTool calls a session tool and fails t on an error result;
// it returns the structured content's fields and the text.
func callSessionTool(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, string) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if res.IsError {
		t.Fatalf("%s: error result: %s", name, text.String())
	}
	var fields map[string]any
	if data, err := json.Marshal(res.StructuredContent); err == nil {
		_ = json.Unmarshal(data, &fields)
	}
	return fields, text.String()
}

// mcpSessionRoundTrip checks what an agent does with the session tools:
// they are listed beside scratchrun_exec; a session opened keeps a Python
// variable from one run to the next; closing ends it, and a run after
// that is an error result naming the end.
func mcpSessionRoundTrip(t *testing.T, ctx context.Context, cs *mcp.ClientSession) {
	t.Helper()
	want := []string{"scratchrun_exec", "scratchrun_session_close", "scratchrun_session_open", "scratchrun_session_run"}
	if got := toolNames(t, ctx, cs); !slices.Equal(got, want) {
		t.Fatalf("tools/list with sessions on: %v, want %v", got, want)
	}
	opened, _ := callSessionTool(t, ctx, cs, "scratchrun_session_open", map[string]any{"runtime": "python3.13"})
	id, _ := opened["session_id"].(string)
	if id == "" {
		t.Fatalf("session_open gave no session_id: %v", opened)
	}
	callSessionTool(t, ctx, cs, "scratchrun_session_run", map[string]any{"session_id": id, "code": "kept = 6 * 7"})
	ran, text := callSessionTool(t, ctx, cs, "scratchrun_session_run", map[string]any{"session_id": id, "code": "print(kept)"})
	if out, _ := ran["stdout"].(string); out != "42\n" {
		t.Errorf("second run in the session: stdout %q (%s)", out, text)
	}
	callSessionTool(t, ctx, cs, "scratchrun_session_close", map[string]any{"session_id": id})
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "scratchrun_session_run", Arguments: map[string]any{"session_id": id, "code": "print(kept)"}})
	if err != nil || !res.IsError {
		t.Errorf("a run after the close: %v %+v", err, res)
	}
}

// `scratchrun mcp` over stdio with sessions on (SCRATCHRUN_SESSIONS=1):
// the local engine's sessions reach the session tools (without a store:
// the caller is the one stdio client), and the sandboxes are gone when
// the client quits.
func TestMCPStdioSessions(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	before := leakcheck.Take(leakOpts)
	cs, cmd, stderr := stdioSession(t, []string{"SCRATCHRUN_SESSIONS=1"}, nil)
	t.Cleanup(func() { cs.Close() }) // when a check stops the test early
	ctx := context.Background()
	mcpSessionRoundTrip(t, ctx, cs)
	// A session left open is ended with the engine when the client quits.
	callSessionTool(t, ctx, cs, "scratchrun_session_open", map[string]any{"runtime": "python3.13"})
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v (stderr %s)", err, stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("scratchrun mcp exited %d:\n%s", code, stderr.String())
	}
	if left := leakcheck.WaitClean(before, leakOpts, 5*time.Second); len(left) > 0 {
		t.Errorf("left behind:\n  %s", strings.Join(left, "\n  "))
	}
}

// `scratchrun mcp --http --sessions`: the local engine's sessions over
// Streamable HTTP behind the token, and nothing left once it drains.
func TestMCPHTTPSessions(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	before := leakcheck.Take(leakOpts)
	const token = "mcp-http-sessions-test-token-0123456789"
	url, stop := startMCPHTTP(t, token, "--sessions")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "mcp-http-sessions-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mcpSessionRoundTrip(t, ctx, cs)
	callSessionTool(t, ctx, cs, "scratchrun_session_open", map[string]any{"runtime": "python3.13"})
	cs.Close()
	if code := stop(); code != 0 {
		t.Errorf("scratchrun mcp --http exited %d", code)
	}
	if left := leakcheck.WaitClean(before, leakOpts, 5*time.Second); len(left) > 0 {
		t.Errorf("left behind:\n  %s", strings.Join(left, "\n  "))
	}
}
