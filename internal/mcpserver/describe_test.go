package mcpserver

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// downThenUp is a Service behind a switch: while down, it fails as an
// unreachable remote server does.
type downThenUp struct {
	execapi.Service
	down atomic.Bool
}

var errDown = errors.New("dial tcp 127.0.0.1:9: connect: connection refused")

func (d *downThenUp) Describe(ctx context.Context) (execapi.Info, error) {
	if d.down.Load() {
		return execapi.Info{}, &ToolError{Message: "Cannot reach the ScratchRun server at http://127.0.0.1:9", Err: errDown}
	}
	return d.Service.Describe(ctx)
}

func (d *downThenUp) Exec(ctx context.Context, req execapi.Request, ev execapi.EventSink) (execapi.Result, error) {
	if d.down.Load() {
		return execapi.Result{}, &ToolError{Message: "Cannot reach the ScratchRun server at http://127.0.0.1:9", Err: errDown}
	}
	return d.Service.Exec(ctx, req, ev)
}

// A Service that cannot describe itself at start (a remote server that is
// down) still gives a usable server: the tool is listed with a free-form
// runtime and says why; calls fail as tool errors naming the server; once
// the Service answers, the tool is re-announced with the runtime enum.
func TestServiceDownAtStartRecovers(t *testing.T) {
	svc := &downThenUp{Service: fakeService()}
	svc.down.Store(true)
	changed := make(chan struct{}, 10)
	cs := connect(t, svc, Options{}, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}})

	tool, raw := listTool(t, cs)
	runtime := raw["inputSchema"].(map[string]any)["properties"].(map[string]any)["runtime"].(map[string]any)
	if runtime["enum"] != nil {
		t.Errorf("runtime enum %v while the runtime list is unknown", runtime["enum"])
	}
	if !strings.Contains(tool.Description, "not available right now") || !strings.Contains(tool.Description, "http://127.0.0.1:9") {
		t.Errorf("description does not say why runtimes are unknown:\n%s", tool.Description)
	}
	msg := errorText(t, call(t, cs, map[string]any{"runtime": "bash", "code": "echo hi"}))
	if !strings.Contains(msg, "Cannot reach the ScratchRun server at http://127.0.0.1:9") {
		t.Errorf("tool error %q", msg)
	}

	svc.down.Store(false)
	res := call(t, cs, map[string]any{"runtime": "bash", "code": "echo back"})
	if res.IsError || structured(t, res).Stdout != "back\n" {
		t.Fatalf("after recovery: %+v", res.Content)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Error("no tools/list_changed after the Service came back")
	}
	_, raw = listTool(t, cs)
	runtime = raw["inputSchema"].(map[string]any)["properties"].(map[string]any)["runtime"].(map[string]any)
	if enum, _ := runtime["enum"].([]any); len(enum) < 4 {
		t.Errorf("runtime enum %v after recovery", runtime["enum"])
	}
}
