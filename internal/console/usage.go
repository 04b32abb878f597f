package console

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/scratchrun/scratchrun/internal/httpapi"
	"github.com/scratchrun/scratchrun/internal/store"
)

// Bounds of the usage pages.
const (
	defaultWindow   = 24 * time.Hour
	maxWindow       = 366 * 24 * time.Hour
	defaultRunsRows = 100
	maxRunsRows     = 1000
	// maxCSVRows bounds an export (the newest rows of the selection);
	// the page says so.
	maxCSVRows = 100_000
	// seriesBars is about how many intervals the chart has.
	seriesBars = 60
)

// seriesSteps are the intervals a chart may use: the smallest that gives at
// most seriesBars bars is taken.
var seriesSteps = []time.Duration{
	time.Minute, 5 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour,
	3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour,
}

// usageQuery is a page's selection: a window ending now and filters.
type usageQuery struct {
	filter store.UsageFilter
	window time.Duration
}

// parseUsageQuery reads since (a window back from now: 90m, 24h, 7d),
// key, runtime and outcome; it answers 400 itself, naming the parameter.
func (h *handlers) parseUsageQuery(w http.ResponseWriter, r *http.Request) (usageQuery, bool) {
	q := r.URL.Query()
	window := defaultWindow
	if s := q.Get("since"); s != "" {
		d, err := parseWindow(s)
		if err != nil {
			writeFieldError(w, "since", err.Error())
			return usageQuery{}, false
		}
		window = d
	}
	now := h.cfg.now()
	f := store.UsageFilter{Since: now.Add(-window), Runtime: q.Get("runtime"), Outcome: q.Get("outcome")}
	if k := q.Get("key"); k != "" {
		f.KeyIDs = []string{k}
	}
	return usageQuery{filter: f, window: window}, true
}

// parseWindow reads a Go duration or a number of days ("7d").
func parseWindow(s string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil {
			return 0, fmt.Errorf("%q is not a window (90m, 24h, 7d)", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q is not a window (90m, 24h, 7d)", s)
		}
	}
	if d < time.Minute || d > maxWindow {
		return 0, fmt.Errorf("%q: the window must be between a minute and %d days", s, int(maxWindow.Hours()/24))
	}
	return d, nil
}

// seriesStep is the chart's interval for a window.
func seriesStep(window time.Duration) time.Duration {
	for _, s := range seriesSteps {
		if window/s <= seriesBars {
			return s
		}
	}
	return seriesSteps[len(seriesSteps)-1]
}

// keyTotals are one key's figures in the selection.
type keyTotals struct {
	KeyID      string           `json:"key_id"`
	Runs       int64            `json:"runs"`
	DurationMS int64            `json:"duration_ms"`
	BytesIn    int64            `json:"bytes_in"`
	BytesOut   int64            `json:"bytes_out"`
	Outcomes   map[string]int64 `json:"outcomes"`
	Refused    int64            `json:"refused"`
}

type seriesPoint struct {
	KeyID string   `json:"key_id"`
	Start jsonTime `json:"start"`
	Runs  int64    `json:"runs"`
}

// usageReport is GET /console/api/usage.
type usageReport struct {
	Since  jsonTime `json:"since"`
	Until  jsonTime `json:"until"`
	StepMS int64    `json:"step_ms"`
	// KeyNames names the keys (and the console) the figures mention.
	KeyNames map[string]string `json:"key_names"`
	Series   []seriesPoint     `json:"series"`
	Runs     int64             `json:"runs"`
	Outcomes map[string]int64  `json:"outcomes"`
	P50MS    int64             `json:"p50_ms"`
	P95MS    int64             `json:"p95_ms"`
	BytesIn  int64             `json:"bytes_in"`
	BytesOut int64             `json:"bytes_out"`
	// Refused counts calls refused before they ran, by reason; null when
	// the selection names a runtime or an outcome, which refusals are not
	// counted by.
	Refused map[string]int64 `json:"refused"`
	PerKey  []keyTotals      `json:"per_key"`
}

// runOutcomes are the outcomes a run is recorded with, always reported
// (zeros included) so that the page's boxes stay in place.
var runOutcomes = []string{"success", "nonzero_exit", "timeout", "memory_limit", "error", "cancelled"}

func (h *handlers) usage(w http.ResponseWriter, r *http.Request) {
	uq, ok := h.parseUsageQuery(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	f := uq.filter
	step := seriesStep(uq.window)
	rep := usageReport{
		Since: jsonTime(f.Since), Until: jsonTime(h.cfg.now()), StepMS: step.Milliseconds(),
		Outcomes: map[string]int64{}, Series: []seriesPoint{}, PerKey: []keyTotals{},
	}
	for _, o := range runOutcomes {
		rep.Outcomes[o] = 0
	}
	points, err := h.cfg.Keys.UsageSeries(ctx, f, step)
	if err != nil {
		h.internal(w, "read usage", err)
		return
	}
	for _, p := range points {
		rep.Series = append(rep.Series, seriesPoint{KeyID: p.KeyID, Start: jsonTime(p.Start), Runs: p.Runs})
	}
	sums, err := h.cfg.Keys.SummarizeUsage(ctx, f)
	if err != nil {
		h.internal(w, "read usage", err)
		return
	}
	perKey := map[string]*keyTotals{}
	for _, s := range sums {
		kt := &keyTotals{KeyID: s.KeyID, Runs: s.Runs, DurationMS: s.Duration.Milliseconds(), BytesIn: s.BytesIn, BytesOut: s.BytesOut, Outcomes: s.Outcomes}
		perKey[s.KeyID] = kt
		rep.Runs += s.Runs
		rep.BytesIn += s.BytesIn
		rep.BytesOut += s.BytesOut
		for o, n := range s.Outcomes {
			rep.Outcomes[o] += n
		}
	}
	pct, err := h.cfg.Keys.DurationPercentiles(ctx, f, 0.5, 0.95)
	if err != nil {
		h.internal(w, "read usage", err)
		return
	}
	rep.P50MS, rep.P95MS = pct[0].Milliseconds(), pct[1].Milliseconds()
	if f.Runtime == "" && f.Outcome == "" {
		refusals, err := h.cfg.Keys.SummarizeRefusals(ctx, f)
		if err != nil {
			h.internal(w, "read refusals", err)
			return
		}
		rep.Refused = map[string]int64{}
		for _, c := range refusals {
			rep.Refused[c.Reason] += c.Count
			kt := perKey[c.KeyID]
			if kt == nil {
				kt = &keyTotals{KeyID: c.KeyID, Outcomes: map[string]int64{}}
				perKey[c.KeyID] = kt
			}
			kt.Refused += c.Count
		}
	}
	for _, kt := range perKey {
		rep.PerKey = append(rep.PerKey, *kt)
	}
	sortByRuns(rep.PerKey)
	if rep.KeyNames, err = h.keyNames(r); err != nil {
		h.internal(w, "list keys", err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// sortByRuns orders keys by runs, most first, then by id.
func sortByRuns(ks []keyTotals) {
	slices.SortFunc(ks, func(a, b keyTotals) int {
		if c := cmp.Compare(b.Runs, a.Runs); c != 0 {
			return c
		}
		return strings.Compare(a.KeyID, b.KeyID)
	})
}

// keyNames names every key, the console and runs without a key.
func (h *handlers) keyNames(r *http.Request) (map[string]string, error) {
	keys, err := h.cfg.Keys.ListKeys(r.Context())
	if err != nil {
		return nil, err
	}
	names := map[string]string{httpapi.ConsoleCaller: "console (playground)", "": "(no key: open server)"}
	for _, k := range keys {
		names[k.ID] = k.Name
	}
	return names, nil
}

// runView is one run in the table of recent runs.
type runView struct {
	Started    jsonTime `json:"started"`
	KeyID      string   `json:"key_id"`
	Runtime    string   `json:"runtime"`
	Worker     string   `json:"worker"`
	Outcome    string   `json:"outcome"`
	ExitCode   int      `json:"exit_code"`
	DurationMS int64    `json:"duration_ms"`
	BytesIn    int64    `json:"bytes_in"`
	BytesOut   int64    `json:"bytes_out"`
}

// runs is GET /console/api/runs: the newest runs of the selection, newest
// first (limit rows, default defaultRunsRows).
func (h *handlers) runs(w http.ResponseWriter, r *http.Request) {
	uq, ok := h.parseUsageQuery(w, r)
	if !ok {
		return
	}
	limit, ok := parseLimit(w, r, defaultRunsRows, maxRunsRows)
	if !ok {
		return
	}
	f := uq.filter
	f.Limit = limit
	rows, err := h.cfg.Keys.ListUsage(r.Context(), f)
	if err != nil {
		h.internal(w, "read runs", err)
		return
	}
	out := make([]runView, 0, len(rows))
	for i := len(rows) - 1; i >= 0; i-- {
		u := rows[i]
		out = append(out, runView{
			Started: jsonTime(u.Started), KeyID: u.KeyID, Runtime: u.Runtime, Worker: u.Worker, Outcome: u.Outcome,
			ExitCode: u.ExitCode, DurationMS: u.Duration.Milliseconds(), BytesIn: u.BytesIn, BytesOut: u.BytesOut,
		})
	}
	names, err := h.keyNames(r)
	if err != nil {
		h.internal(w, "list keys", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": out, "key_names": names, "limit": limit})
}

// parseLimit reads the limit parameter; it answers 400 itself.
func parseLimit(w http.ResponseWriter, r *http.Request, def, most int) (int, bool) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return def, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > most {
		writeFieldError(w, "limit", fmt.Sprintf("%q: give a whole number from 1 to %d", s, most))
		return 0, false
	}
	return n, true
}
