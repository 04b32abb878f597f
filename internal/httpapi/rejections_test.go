package httpapi

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// The rejection counts the console reads (Server.Live) and /metrics'
// scratchrun_rejections_total are one count: every reason alike in both,
// the zeros of reasons never hit included, and Live's map a copy of its
// own.
func TestRejectionCountsAreOneFact(t *testing.T) {
	ts := startServer(t, serverOptions{fake: scripted(), maxBody: 4096})
	ts.post("", `{"runtime": "bash"}`)
	ts.post("", `{"runtime": "bash", "code": "x", "limits": {"timeout_ms": 0}}`)
	ts.post("", `{"runtime": "bash", "code": "`+strings.Repeat("x", 5000)+`"}`)
	ts.do(context.Background(), http.MethodPost, "/v1/exec", "", strings.NewReader(quickBody), map[string]string{"Content-Type": "text/plain"})

	live := ts.srv.Live().Rejections
	want := map[string]int64{reasonInvalidRequest: 2, reasonBodyTooLarge: 1, reasonMediaType: 1}
	for reason, n := range want {
		if live[reason] != n {
			t.Errorf("Live: %d %s, want %d", live[reason], reason, n)
		}
	}
	never, ok := live[string(execapi.RefusedNoWorkers)]
	if n := seriesOf(t, ts, "scratchrun_rejections_total"); n != len(live) || !ok || never != 0 {
		t.Errorf("%d series of scratchrun_rejections_total, %d reasons in Live (%s: %d, %v)", n, len(live), execapi.RefusedNoWorkers, never, ok)
	}
	for reason, n := range live {
		if got := ts.metric(`scratchrun_rejections_total{reason="` + reason + `"}`); got != float64(n) {
			t.Errorf("%s: /metrics says %v, Live %d", reason, got, n)
		}
	}
	live[reasonInvalidRequest] = 99
	if n := ts.srv.Live().Rejections[reasonInvalidRequest]; n != 2 {
		t.Errorf("a change to Live's map reached the count: %d", n)
	}
}

// seriesOf counts the series of a metric on the server's /metrics.
func seriesOf(t *testing.T, ts *testServer, name string) int {
	t.Helper()
	resp, err := httpClient.Get(ts.metricsURL + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(body), "\n"+name+"{")
}

// Rejections counted at once from many requests are all counted.
func TestRejectionsCountConcurrently(t *testing.T) {
	r := newRejections("draining")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				r.add("draining")
				r.add("memory")
			}
		})
	}
	wg.Wait()
	if c := r.counts(); c["draining"] != 800 || c["memory"] != 800 || len(c) != 2 {
		t.Errorf("counts %v", c)
	}
}
