package mcpserver

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/leakcheck"
)

// progressLog collects the progress notifications a client receives.
type progressLog struct {
	mu    sync.Mutex
	items []*mcp.ProgressNotificationParams
	seen  chan *mcp.ProgressNotificationParams
}

func newProgressLog() *progressLog {
	return &progressLog{seen: make(chan *mcp.ProgressNotificationParams, 100)}
}

func (p *progressLog) handler(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	p.items = append(p.items, req.Params)
	p.mu.Unlock()
	select {
	case p.seen <- req.Params:
	default:
	}
}

func (p *progressLog) all() []*mcp.ProgressNotificationParams {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*mcp.ProgressNotificationParams(nil), p.items...)
}

// A client that sends a progress token gets notifications while the code
// runs: increasing progress, and the output so far in the message.
func TestProgressNotifications(t *testing.T) {
	plog := newProgressLog()
	cs := connect(t, testEngine(t), Options{ProgressInterval: 200 * time.Millisecond},
		&mcp.ClientOptions{ProgressNotificationHandler: plog.handler})
	params := &mcp.CallToolParams{Name: ToolName, Arguments: map[string]any{
		"runtime": "bash", "code": "for i in 1 2 3 4 5 6; do echo step $i; sleep 0.3; done",
	}}
	params.SetProgressToken("tok-1")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	items := plog.all()
	if len(items) < 3 {
		t.Fatalf("%d progress notifications for a 1.8 s run at 200 ms intervals, want several", len(items))
	}
	var last float64
	sawOutput := false
	for _, p := range items {
		if p.ProgressToken != "tok-1" {
			t.Errorf("progress token %v", p.ProgressToken)
		}
		if p.Progress <= last {
			t.Errorf("progress does not increase: %v after %v", p.Progress, last)
		}
		last = p.Progress
		if strings.Contains(p.Message, "step ") && strings.Contains(p.Message, "Running for") {
			sawOutput = true
		}
	}
	if !sawOutput {
		t.Errorf("no progress message showed the output so far: %q", items[len(items)-1].Message)
	}

	// Without a token, no notifications.
	n := len(plog.all())
	call(t, cs, map[string]any{"runtime": "bash", "code": "sleep 0.6; echo quiet"})
	if got := len(plog.all()); got != n {
		t.Errorf("%d notifications for a call without a progress token", got-n)
	}
}

// Cancelling a call (notifications/cancelled from the client) kills its
// sandbox at once: Exec returns long before the program would end, and
// nothing of the sandbox is left.
func TestCancellationKillsTheSandbox(t *testing.T) {
	rec := newRecording(testEngine(t))
	plog := newProgressLog()
	cs := connect(t, rec, Options{ProgressInterval: 100 * time.Millisecond},
		&mcp.ClientOptions{ProgressNotificationHandler: plog.handler})
	before := leakcheck.Take(leakOpts)

	waited := startLongCall(t, cs, plog).cancelAndWait(t, rec)
	// Generous: the program would run 25 s; a kill takes milliseconds.
	if waited > 10*time.Second {
		t.Errorf("Exec returned %v after the cancellation", waited)
	}
	t.Logf("Exec returned %v after the client cancelled", waited)
	if left := leakcheck.WaitClean(before, leakOpts, 5*time.Second); len(left) > 0 {
		t.Errorf("the cancelled sandbox left behind:\n  %s", strings.Join(left, "\n  "))
	}
}
