package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/store"
)

// On the real engine: a run that prints a random value, its client timing
// out mid-run; the retries with the same Idempotency-Key get the value the
// one run printed, and the key's usage shows one run.
func TestIdempotentRetryAfterDroppedConnection(t *testing.T) {
	ts := startServer(t, serverOptions{})
	k, key := ts.key("idem", 100, 4)
	// The run outlasts the client's timeout whatever the sandbox's start
	// takes: the sleep alone is longer.
	body := `{"runtime": "bash", "code": "cat /proc/sys/kernel/random/uuid; sleep 3"}`
	impatient := &http.Client{Timeout: time.Second}
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/exec", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(IdempotencyKeyHeader, "uuid-once")
	resp, err := impatient.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("the first call answered %d within a second of a 3 s run", resp.StatusCode)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("the first call: %v, want its client's timeout", err)
	}

	var values []string
	for i := range 2 {
		a := ts.mustPostKey(key, "uuid-once", body)
		var res execapi.Result
		if err := json.Unmarshal(a.body, &res); err != nil || a.status != http.StatusOK || res.ExitCode != 0 ||
			len(strings.TrimSpace(res.Stdout)) != 36 || a.header.Get(IdempotencyReplayedHeader) != "true" {
			t.Fatalf("retry %d: %d %s %v", i, a.status, a.body, a.header)
		}
		values = append(values, res.Stdout)
	}
	if values[0] != values[1] {
		t.Errorf("the retries saw two values: %q and %q", values[0], values[1])
	}
	rows, err := ts.keys.ListUsage(context.Background(), store.UsageFilter{KeyIDs: []string{k.ID}})
	if err != nil || len(rows) != 1 || rows[0].Outcome != string(execapi.OutcomeSuccess) {
		t.Errorf("usage rows of the key: %+v, %v; want one successful run", rows, err)
	}
}
