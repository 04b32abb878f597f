package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/store"
)

// In a real sandbox, output written with pauses between arrives as
// separate chunks, in the order written, after started and before the
// result, which holds the same text.
func TestStreamRealSandboxChunks(t *testing.T) {
	ts := startServer(t, serverOptions{})
	_, key := ts.key("alice", 100, 4)
	a, all := ts.streamAll(key, `{"runtime": "bash", "code": "echo one; sleep 0.5; echo two >&2; sleep 0.5; echo three"}`)
	evs := checkStream(t, all)
	if a.status != http.StatusOK || len(evs) != 5 {
		t.Fatalf("answer %d, events %v", a.status, evs)
	}
	var got []string
	for _, ev := range evs[1:4] {
		got = append(got, ev.name+":"+ev.text(t))
	}
	if evs[0].name != "started" || strings.Join(got, "|") != "stdout:one\n|stderr:two\n|stdout:three\n" {
		t.Errorf("events %v", evs)
	}
	var res execapi.Result
	if err := json.Unmarshal([]byte(evs[4].data), &res); err != nil || evs[4].name != "result" ||
		res.Stdout != "one\nthree\n" || res.Stderr != "two\n" || res.ExitCode != 0 || !res.StatePurged {
		t.Errorf("last event %s: %+v %v", evs[4].name, res, err)
	}
}

// The first chunk arrives while the code still runs: a client that hangs
// up on reading it ends a run that would otherwise have slept on, and the
// run is recorded once, as cancelled (had the chunk come with the result,
// it would be a success), its sandbox killed and cleaned up.
func TestStreamFirstChunkBeforeTheRunEnds(t *testing.T) {
	ts := startServer(t, serverOptions{capacity: 1})
	k, key := ts.key("alice", 100, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := ts.streamPost(ctx, key, `{"runtime": "bash", "code": "echo ready; sleep 25", "limits": {"timeout_ms": 30000}}`, "text/event-stream")
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	readSSE(resp.Body, func(ev sseEvent) bool {
		seen = append(seen, ev.String())
		return ev.name != "stdout" && ev.name != "result"
	})
	cancel()
	resp.Body.Close()
	if len(seen) != 2 || !strings.HasPrefix(seen[0], "1 started") || seen[1] != `2 stdout {"text":"ready\n"}` {
		t.Fatalf("events before hanging up: %q", seen)
	}
	var rows []store.Usage
	waitFor(t, "the usage row", func() bool {
		rows, _ = ts.keys.ListUsage(context.Background(), store.UsageFilter{KeyIDs: []string{k.ID}})
		return len(rows) > 0
	})
	waitFor(t, "the slot to free", func() bool { return ts.metric("scratchrun_sandboxes_in_use") == 0 })
	if len(rows) != 1 || rows[0].Outcome != "cancelled" || rows[0].ExitCode != -1 {
		t.Errorf("usage rows %+v, want one cancelled run", rows)
	}
}
