package console

import (
	"context"
	"encoding/csv"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/httpapi"
	"github.com/scratchrun/scratchrun/internal/store"
)

// The usage report adds up what the store holds for the window and the
// filters: outcomes, refusals, durations, bytes, runs per key over time,
// the table of recent runs and the CSV export.
func TestUsageReport(t *testing.T) {
	tc := startConsole(t, consoleOptions{})
	ctx := context.Background()
	now := tc.clock.now()
	k, _, err := tc.keys.CreateKey(ctx, store.NewKey{Name: "agent", RatePerMin: 60, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	record := func(key, runtime, outcome string, ago, dur time.Duration, in, out int64) {
		if err := tc.keys.RecordUsage(ctx, store.Usage{KeyID: key, Runtime: runtime, Started: now.Add(-ago), Duration: dur,
			Outcome: outcome, BytesIn: in, BytesOut: out}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 8 {
		record(k.ID, "python3.13", "success", time.Duration(i+1)*time.Minute, time.Duration(100*(i+1))*time.Millisecond, 10, 100)
	}
	record(k.ID, "bash", "timeout", 3*time.Minute, 10*time.Second, 5, 0)
	record(k.ID, "bash", "memory_limit", 4*time.Minute, 2*time.Second, 5, 0)
	record(httpapi.ConsoleCaller, "bash", "nonzero_exit", 5*time.Minute, 50*time.Millisecond, 1, 2)
	record(k.ID, "bash", "success", 3*time.Hour, time.Millisecond, 1, 1) // outside the hour
	for range 3 {
		if err := tc.keys.RecordRefusal(ctx, k.ID, "key_rate", now.Add(-2*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}

	b := tc.browser()
	b.signIn()
	var rep usageReport
	b.getJSON("/console/api/usage?since=1h", &rep)
	if rep.Runs != 11 || rep.Outcomes["success"] != 8 || rep.Outcomes["timeout"] != 1 || rep.Outcomes["memory_limit"] != 1 ||
		rep.Outcomes["nonzero_exit"] != 1 || rep.Outcomes["error"] != 0 {
		t.Errorf("runs %d, outcomes %v", rep.Runs, rep.Outcomes)
	}
	if rep.Refused["key_rate"] != 3 {
		t.Errorf("refused %v", rep.Refused)
	}
	// Durations: 50ms, 100..800ms, 2s, 10s: the 6th of 11 is 500 ms, the
	// 11th (p95) 10 s.
	if rep.P50MS != 500 || rep.P95MS != 10000 {
		t.Errorf("p50 %d ms, p95 %d ms", rep.P50MS, rep.P95MS)
	}
	if rep.BytesIn != 8*10+5+5+1 || rep.BytesOut != 8*100+2 {
		t.Errorf("bytes in %d out %d", rep.BytesIn, rep.BytesOut)
	}
	if rep.StepMS != time.Minute.Milliseconds() {
		t.Errorf("step %d ms for an hour", rep.StepMS)
	}
	var seriesRuns int64
	for _, p := range rep.Series {
		seriesRuns += p.Runs
	}
	if seriesRuns != 11 {
		t.Errorf("the series holds %d runs", seriesRuns)
	}
	if len(rep.PerKey) != 2 || rep.PerKey[0].KeyID != k.ID || rep.PerKey[0].Runs != 10 || rep.PerKey[0].Refused != 3 || rep.PerKey[1].KeyID != httpapi.ConsoleCaller {
		t.Errorf("per key %+v", rep.PerKey)
	}
	if rep.KeyNames[k.ID] != "agent" || rep.KeyNames[httpapi.ConsoleCaller] == "" {
		t.Errorf("key names %v", rep.KeyNames)
	}

	// Filters: a runtime leaves refusals out (they have none).
	b.getJSON("/console/api/usage?since=1h&runtime=bash", &rep)
	if rep.Runs != 3 || rep.Refused != nil {
		t.Errorf("bash: %d runs, refused %v", rep.Runs, rep.Refused)
	}
	b.getJSON("/console/api/usage?since=24h&key="+k.ID, &rep)
	if rep.Runs != 11 || rep.Refused["key_rate"] != 3 {
		t.Errorf("the key over a day: %d runs, refused %v", rep.Runs, rep.Refused)
	}
	b.getJSON("/console/api/usage?since=7d", &rep)
	if rep.StepMS != (3 * time.Hour).Milliseconds() {
		t.Errorf("step %d ms for a week", rep.StepMS)
	}

	var runs struct {
		Runs     []runView
		KeyNames map[string]string `json:"key_names"`
	}
	b.getJSON("/console/api/runs?since=1h&outcome=success&limit=3", &runs)
	if len(runs.Runs) != 3 || runs.Runs[0].Outcome != "success" || !time.Time(runs.Runs[0].Started).After(time.Time(runs.Runs[1].Started)) {
		t.Errorf("recent successes: %+v", runs.Runs)
	}
	for q, field := range map[string]string{"since=forever": "since", "since=0s": "since", "since=1000d": "since", "limit=0": "limit", "limit=5000": "limit"} {
		if r := b.do(http.MethodGet, "/console/api/runs?"+q, "", "", nil); r.status != http.StatusBadRequest || errorOf(t, r).Field != field {
			t.Errorf("runs?%s: %d %s", q, r.status, r.body)
		}
	}

	r := b.do(http.MethodGet, "/console/api/runs.csv?since=1h&runtime=bash", "", "", nil)
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/csv") || !strings.Contains(r.header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("CSV: %d %v", r.status, r.header)
	}
	rows, err := csv.NewReader(strings.NewReader(r.body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 || strings.Join(rows[0], ",") != strings.Join(csvColumns, ",") {
		t.Fatalf("CSV rows %v", rows)
	}
	if rows[1][1] != httpapi.ConsoleCaller || rows[1][5] != "nonzero_exit" || rows[3][2] != "agent" || rows[3][3] != "bash" {
		t.Errorf("CSV rows oldest first with names: %v", rows[1:])
	}
}

// A cell that a spreadsheet would take for a formula is defused.
func TestCSVText(t *testing.T) {
	for in, want := range map[string]string{"=HYPERLINK(1)": "'=HYPERLINK(1)", "+1": "'+1", "@x": "'@x", "-2": "'-2", "bash": "bash", "": ""} {
		if got := csvText(in); got != want {
			t.Errorf("csvText(%q) = %q, want %q", in, got, want)
		}
	}
}

// The chart's interval keeps it to about seriesBars bars.
func TestSeriesStep(t *testing.T) {
	for window, want := range map[time.Duration]time.Duration{
		time.Hour: time.Minute, 24 * time.Hour: 30 * time.Minute, 7 * 24 * time.Hour: 3 * time.Hour,
		30 * 24 * time.Hour: 12 * time.Hour, 366 * 24 * time.Hour: 7 * 24 * time.Hour,
	} {
		if got := seriesStep(window); got != want {
			t.Errorf("seriesStep(%s) = %s, want %s", window, got, want)
		}
	}
}
