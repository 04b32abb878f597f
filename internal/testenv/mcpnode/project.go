package mcpnode

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

var setup struct {
	once sync.Once
	dir  string
	err  string
}

// Dir returns test/mcp-node with its dependencies installed (npm ci the
// first time in a process, when node_modules lacks the SDK).
func Dir(t testing.TB) string {
	t.Helper()
	setup.once.Do(func() {
		for _, tool := range []string{"node", "npm", "npx"} {
			if _, err := exec.LookPath(tool); err != nil {
				setup.err = tool + " is not installed: the MCP client tests need Node.js 20 or later and npm (scripts/test.sh installs them)"
				return
			}
		}
		_, here, _, _ := runtime.Caller(0)
		dir := filepath.Join(filepath.Dir(here), "..", "..", "..", "test", "mcp-node")
		setup.dir = dir
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "ci")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			setup.err = "npm ci in test/mcp-node: " + err.Error() + "\n" + string(out)
		}
	})
	if setup.err != "" {
		t.Fatal(setup.err)
	}
	return setup.dir
}
