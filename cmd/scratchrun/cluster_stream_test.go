package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/store"
)

// Streamed calls through a front end: a worker's sandbox output arrives
// in chunks, in order, before the result; and a client that hangs up on
// the first chunk (which comes while the code still runs) kills the
// sandbox on its worker, the run recorded once, as cancelled.
func clusterStream(t *testing.T, c *testCluster) {
	k, key := c.key("stream", 1000, 4)
	events := func(ctx context.Context, body string, each func(name, data string) bool) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.fronts[0].url+"/v1/exec", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := clusterClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 32<<20)
		var name string
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				name = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok && !each(name, v) {
				break
			}
		}
		return resp.StatusCode
	}
	var got []string
	var res execapi.Result
	status := events(context.Background(), `{"runtime": "bash", "code": "echo one; sleep 0.5; echo two >&2; sleep 0.5; echo three"}`, func(name, data string) bool {
		switch name {
		case "stdout", "stderr":
			var chunk struct{ Text string }
			json.Unmarshal([]byte(data), &chunk)
			got = append(got, name+":"+chunk.Text)
		case "result":
			json.Unmarshal([]byte(data), &res)
			got = append(got, name)
		default:
			got = append(got, name)
		}
		return true
	})
	if status != http.StatusOK || strings.Join(got, "|") != "started|stdout:one\n|stderr:two\n|stdout:three\n|result" ||
		res.Stdout != "one\nthree\n" || res.Stderr != "two\n" {
		t.Fatalf("answer %d, events %q, result %+v", status, got, res)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var first string
	events(ctx, `{"runtime": "bash", "code": "echo ready; sleep 25", "limits": {"timeout_ms": 30000}}`, func(name, data string) bool {
		first = name + " " + data
		return name != "stdout" && name != "result" && name != "error"
	})
	cancel()
	if first != `stdout {"text":"ready\n"}` {
		t.Fatalf("the first chunk: %q", first)
	}
	hungUp := time.Now()
	var rows []store.Usage
	for {
		n := 0
		for _, w := range c.workers {
			n += w.sandboxes()
		}
		rows, _ = c.keys.ListUsage(context.Background(), store.UsageFilter{KeyIDs: []string{k.ID}})
		if n == 0 && len(rows) == 2 {
			break
		}
		if time.Since(hungUp) > 20*time.Second {
			t.Fatalf("%s after hanging up: %d sandboxes run, usage rows %+v", time.Since(hungUp), n, rows)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if rows[0].Outcome != "success" || rows[1].Outcome != "cancelled" || rows[1].Worker == "" {
		t.Errorf("usage rows %+v, want a success and a cancelled run", rows)
	}
}
