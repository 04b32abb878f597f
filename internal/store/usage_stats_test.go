package store

import (
	"context"
	"testing"
	"time"
)

// The console's reads of usage: filters by runtime, outcome and window,
// runs per key over time, duration percentiles and each key's last run,
// on both databases.
func TestUsageSeriesPercentilesAndFilters(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t)
		// Ten minutes from a whole hour; key_a runs once a minute (bash,
		// 10..100 ms), key_b every other minute (python, failing).
		base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		for i := range 10 {
			at := base.Add(time.Duration(i)*time.Minute + 7*time.Second)
			if err := s.RecordUsage(ctx, Usage{KeyID: "key_a", Runtime: "bash", Started: at,
				Duration: time.Duration(10*(i+1)) * time.Millisecond, Outcome: "success"}); err != nil {
				t.Fatal(err)
			}
			if i%2 == 0 {
				if err := s.RecordUsage(ctx, Usage{KeyID: "key_b", Runtime: "python3.13", Started: at.Add(time.Second),
					Duration: 1000 * time.Millisecond, ExitCode: 1, Outcome: "nonzero_exit"}); err != nil {
					t.Fatal(err)
				}
			}
		}

		rows, err := s.ListUsage(ctx, UsageFilter{Runtime: "python3.13"})
		if err != nil || len(rows) != 5 {
			t.Fatalf("runtime filter: %d rows, %v", len(rows), err)
		}
		for _, u := range rows {
			if u.KeyID != "key_b" {
				t.Errorf("runtime filter let through %+v", u)
			}
		}
		if rows, _ := s.ListUsage(ctx, UsageFilter{Outcome: "success", Until: base.Add(3 * time.Minute)}); len(rows) != 3 {
			t.Errorf("outcome and until: %d rows, want 3", len(rows))
		}
		if rows, _ := s.ListUsage(ctx, UsageFilter{Runtime: "bash", Outcome: "nonzero_exit"}); len(rows) != 0 {
			t.Errorf("runtime and outcome that never met: %d rows", len(rows))
		}

		// Five-minute intervals: key_a 5 and 5, key_b 3 and 2.
		points, err := s.UsageSeries(ctx, UsageFilter{}, 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		want := []UsagePoint{
			{"key_a", base, 5}, {"key_b", base, 3},
			{"key_a", base.Add(5 * time.Minute), 5}, {"key_b", base.Add(5 * time.Minute), 2},
		}
		if len(points) != len(want) {
			t.Fatalf("series %+v, want %+v", points, want)
		}
		for i, p := range points {
			if p.KeyID != want[i].KeyID || !p.Start.Equal(want[i].Start) || p.Runs != want[i].Runs {
				t.Errorf("point %d = %+v, want %+v", i, p, want[i])
			}
		}
		if points, _ := s.UsageSeries(ctx, UsageFilter{KeyIDs: []string{"key_b"}, Since: base.Add(5 * time.Minute)}, time.Hour); len(points) != 1 || points[0].Runs != 2 || !points[0].Start.Equal(base) {
			t.Errorf("an hour's interval of key_b's later runs: %+v", points)
		}
		if _, err := s.UsageSeries(ctx, UsageFilter{}, 0); err == nil {
			t.Error("a zero step was taken")
		}

		// key_a's durations are 10, 20, ..., 100 ms: by nearest rank the
		// median is the 5th (50 ms), p95 the 10th, p10 the 1st.
		pct, err := s.DurationPercentiles(ctx, UsageFilter{KeyIDs: []string{"key_a"}}, 0.5, 0.95, 0.1)
		if err != nil {
			t.Fatal(err)
		}
		if pct[0] != 50*time.Millisecond || pct[1] != 100*time.Millisecond || pct[2] != 10*time.Millisecond {
			t.Errorf("percentiles of key_a = %v, want [50ms 100ms 10ms]", pct)
		}
		if pct, _ := s.DurationPercentiles(ctx, UsageFilter{}, 0.5); pct[0] != 80*time.Millisecond {
			// 15 runs: the 8th is key_a's 80 ms (five of key_b take 1 s).
			t.Errorf("median of all = %v, want 80ms", pct[0])
		}
		if pct, err := s.DurationPercentiles(ctx, UsageFilter{Runtime: "none"}, 0.5, 0.95); err != nil || pct[0] != 0 || pct[1] != 0 {
			t.Errorf("percentiles of nothing = %v, %v", pct, err)
		}
		if _, err := s.DurationPercentiles(ctx, UsageFilter{}, 0); err == nil {
			t.Error("a percentile of 0 was taken")
		}

		last, err := s.LastUsed(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(last) != 2 || !last["key_a"].Equal(base.Add(9*time.Minute+7*time.Second)) || !last["key_b"].Equal(base.Add(8*time.Minute+8*time.Second)) {
			t.Errorf("LastUsed = %v", last)
		}
	})
}

// Refusals, counted by key, reason and minute from several handles at once,
// add up, and their window is taken to the minute.
func TestRefusalCounts(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, other := b.open(t), b.open(t)
		minute := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		atOnce(t, 60, []*Store{s, other}, func(i int, st *Store) error {
			reason := "key_rate"
			if i%3 == 0 {
				reason = "at_capacity"
			}
			// Half in the first minute, half in the next.
			return st.RecordRefusal(ctx, "key_a", reason, minute.Add(time.Duration(2*i)*time.Second))
		})
		if err := s.RecordRefusal(ctx, "key_b", "key_concurrency", minute.Add(90*time.Second)); err != nil {
			t.Fatal(err)
		}
		all, err := s.SummarizeRefusals(ctx, UsageFilter{})
		if err != nil {
			t.Fatal(err)
		}
		want := []RefusalCount{{"key_a", "at_capacity", 20}, {"key_a", "key_rate", 40}, {"key_b", "key_concurrency", 1}}
		if len(all) != len(want) {
			t.Fatalf("refusals %+v, want %+v", all, want)
		}
		for i := range want {
			if all[i] != want[i] {
				t.Errorf("refusal count %d = %+v, want %+v", i, all[i], want[i])
			}
		}
		var rows int64
		if err := s.db.queryRow(ctx, `SELECT COUNT(*) FROM refusals`).Scan(&rows); err != nil || rows != 5 {
			t.Errorf("%d rows of refusals, %v; want one per key, reason and minute (5)", rows, err)
		}
		// A window from 12:01:30 takes the whole minute 12:01.
		later, _ := s.SummarizeRefusals(ctx, UsageFilter{KeyIDs: []string{"key_a"}, Since: minute.Add(90 * time.Second)})
		var n int64
		for _, c := range later {
			n += c.Count
		}
		if n != 30 {
			t.Errorf("key_a's refusals from 12:01:30 = %d (%+v), want the minute's 30", n, later)
		}
		if none, _ := s.SummarizeRefusals(ctx, UsageFilter{Until: minute}); len(none) != 0 {
			t.Errorf("refusals before any: %+v", none)
		}
	})
}
