package store

import (
	"context"
	"fmt"
	"math"
	"time"
)

// UsagePoint counts the runs of one key that started in one interval.
type UsagePoint struct {
	KeyID string
	// Start is the interval's start, a multiple of the series' step since
	// the epoch.
	Start time.Time
	Runs  int64
}

// RefusalCount counts the calls of one key refused, for one reason, before
// they ran.
type RefusalCount struct {
	KeyID  string
	Reason string
	Count  int64
}

// refusalBucket is the resolution refusals are counted at: one row per key,
// reason and minute, so that a key hammering at its limit adds one row a
// minute, not one per call.
const refusalBucket = time.Minute

// LastUsed returns when each key that ever ran anything started its
// latest run.
func (s *Store) LastUsed(ctx context.Context) (map[string]time.Time, error) {
	rs, err := s.db.query(ctx, `SELECT key_id, MAX(started_ms) FROM usage GROUP BY key_id`)
	if err != nil {
		return nil, fmt.Errorf("last use of keys: %w", err)
	}
	defer rs.Close()
	out := map[string]time.Time{}
	for rs.Next() {
		var key string
		var ms int64
		if err := rs.Scan(&key, &ms); err != nil {
			return nil, fmt.Errorf("last use of keys: %w", err)
		}
		out[key] = time.UnixMilli(ms)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("last use of keys: %w", err)
	}
	return out, nil
}

// UsageSeries counts the selected runs per key in intervals of step
// (aligned to multiples of step since the epoch), ordered by interval
// and key; intervals without runs are left out.
func (s *Store) UsageSeries(ctx context.Context, f UsageFilter, step time.Duration) ([]UsagePoint, error) {
	stepMS := step.Milliseconds()
	if stepMS <= 0 {
		return nil, fmt.Errorf("usage series: step %s: must be at least a millisecond", step)
	}
	where, args := f.where()
	// The step is an integer of ours, written into the SQL: integer
	// division floors in both databases, and a placeholder's type would
	// have to be spelled for PostgreSQL.
	bucket := fmt.Sprintf("(started_ms / %d) * %d", stepMS, stepMS)
	rs, err := s.db.query(ctx, `SELECT key_id, `+bucket+`, COUNT(*) FROM usage`+where+` GROUP BY 1, 2 ORDER BY 2, 1`, args...)
	if err != nil {
		return nil, fmt.Errorf("usage series: %w", err)
	}
	defer rs.Close()
	var out []UsagePoint
	for rs.Next() {
		var p UsagePoint
		var startMS int64
		if err := rs.Scan(&p.KeyID, &startMS, &p.Runs); err != nil {
			return nil, fmt.Errorf("usage series: %w", err)
		}
		p.Start = time.UnixMilli(startMS)
		out = append(out, p)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("usage series: %w", err)
	}
	return out, nil
}

// DurationPercentiles returns the duration of the selected runs at
// each share in ps (0.5 for the median; each in (0, 1]), by nearest
// rank; zeros when nothing is selected. f.Limit is ignored.
func (s *Store) DurationPercentiles(ctx context.Context, f UsageFilter, ps ...float64) ([]time.Duration, error) {
	for _, p := range ps {
		if !(p > 0 && p <= 1) {
			return nil, fmt.Errorf("duration percentile %v: must be in (0, 1]", p)
		}
	}
	where, args := f.where()
	var n int64
	if err := s.db.queryRow(ctx, `SELECT COUNT(*) FROM usage`+where, args...).Scan(&n); err != nil {
		return nil, fmt.Errorf("duration percentiles: %w", err)
	}
	out := make([]time.Duration, len(ps))
	if n == 0 {
		return out, nil
	}
	// Nearest rank: the smallest duration at least a share p of the runs
	// do not exceed. Neither database has a percentile both spell alike
	// (PostgreSQL's percentile_disc, none in SQLite), so each is one
	// ordered read of one row.
	for i, p := range ps {
		rank := max(int64(math.Ceil(p*float64(n))), 1)
		var ms int64
		err := s.db.queryRow(ctx, fmt.Sprintf(`SELECT duration_ms FROM usage%s ORDER BY duration_ms LIMIT 1 OFFSET %d`, where, rank-1), args...).Scan(&ms)
		if isNoRows(err) {
			// Rows went away between the count and the read: the
			// longest left is the best answer there is.
			err = s.db.queryRow(ctx, `SELECT COALESCE(MAX(duration_ms), 0) FROM usage`+where, args...).Scan(&ms)
		}
		if err != nil {
			return nil, fmt.Errorf("duration percentiles: %w", err)
		}
		out[i] = time.Duration(ms) * time.Millisecond
	}
	return out, nil
}

// RecordRefusal counts one call of keyID refused before it ran (a
// key's limit, a full server, draining, an unknown runtime), by its
// reason, in the minute of at.
func (s *Store) RecordRefusal(ctx context.Context, keyID, reason string, at time.Time) error {
	_, err := s.db.exec(ctx, `INSERT INTO refusals (key_id, minute_ms, reason, n) VALUES (?, ?, ?, 1)
		ON CONFLICT (key_id, minute_ms, reason) DO UPDATE SET n = refusals.n + 1`,
		keyID, at.Truncate(refusalBucket).UnixMilli(), reason)
	if err != nil {
		return fmt.Errorf("record refusal: %w", err)
	}
	return nil
}

// SummarizeRefusals totals the refusals per key and reason, ordered by
// both, in the window of f (KeyIDs, Since and Until, to the minute;
// the other fields are ignored).
func (s *Store) SummarizeRefusals(ctx context.Context, f UsageFilter) ([]RefusalCount, error) {
	// Refusals are kept by the minute: a window starting within a minute
	// takes that whole minute.
	if !f.Since.IsZero() {
		f.Since = f.Since.Truncate(refusalBucket)
	}
	where, args := f.whereOn("minute_ms", false)
	rs, err := s.db.query(ctx, `SELECT key_id, reason, CAST(SUM(n) AS BIGINT) FROM refusals`+where+` GROUP BY key_id, reason ORDER BY key_id, reason`, args...)
	if err != nil {
		return nil, fmt.Errorf("summarize refusals: %w", err)
	}
	defer rs.Close()
	var out []RefusalCount
	for rs.Next() {
		var c RefusalCount
		if err := rs.Scan(&c.KeyID, &c.Reason, &c.Count); err != nil {
			return nil, fmt.Errorf("summarize refusals: %w", err)
		}
		out = append(out, c)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("summarize refusals: %w", err)
	}
	return out, nil
}
