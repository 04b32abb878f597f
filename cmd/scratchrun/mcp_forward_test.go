package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// The client mode macOS and Windows builds have, in the Linux build of the
// same code: `scratchrun mcp` with SCRATCHRUN_API_URL and SCRATCHRUN_API_KEY
// forwards the SDK client's call to a real `scratchrun serve` (its own
// process, with a key in a real SQLite store), which runs it in a sandbox;
// the key shows nowhere, and nothing is left behind.
func TestMCPForwardsToServe(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	before := leakcheck.Take(leakOpts)
	db := filepath.Join(t.TempDir(), "keys.db")
	key := createKey(t, db, "desktop")
	server := startServe(t, "--db", db)

	cs, _, stderr := stdioSession(t, []string{"SCRATCHRUN_API_KEY=" + key, "SCRATCHRUN_API_URL=" + server.url}, nil)
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 1 {
		t.Fatalf("tools/list through the server: %v %+v", err, tools)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "scratchrun_exec",
		Arguments: map[string]any{"runtime": "bash", "code": "echo forwarded-$((6*7))"}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v (mcp stderr %q, serve stderr %q)", err, res, stderr.String(), server.stderr())
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "forwarded-42") {
		t.Errorf("result does not carry the run's output:\n%s", text)
	}
	cs.Close()
	server.stop(t) // its warm pool's sandboxes go with it
	if strings.Contains(stderr.String()+tools.Tools[0].Description, key) {
		t.Errorf("the API key shows in the tool or the log")
	}
	if left := leakcheck.WaitClean(before, leakOpts, 5*time.Second); len(left) > 0 {
		t.Errorf("left behind:\n  %s", strings.Join(left, "\n  "))
	}
}
