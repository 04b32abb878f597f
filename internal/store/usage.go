package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// LocalWorker is the worker of a run on the front end's own engine (the
// single-machine path).
const LocalWorker = "local"

// Usage is one run, as accounted.
type Usage struct {
	// KeyID is the key that asked for the run; empty when the server ran
	// without keys.
	KeyID   string
	Runtime string
	// Worker is the worker that ran it: LocalWorker on one machine, a
	// worker's id in a cluster. Empty is recorded as LocalWorker.
	Worker  string
	Started time.Time
	// Duration is the run's wall time in the engine (sandbox set-up, the
	// program and teardown), not the time it waited in the queue.
	Duration time.Duration
	// ExitCode is the program's exit code, -1 when the run produced no result.
	ExitCode int
	// Outcome classifies the run: "success", "nonzero_exit", "timeout",
	// "memory_limit", "cancelled" or "error".
	Outcome string
	// BytesIn counts the payload sent in (code, file contents, env values);
	// BytesOut the payload sent back (stdout, stderr, returned files).
	BytesIn  int64
	BytesOut int64
}

// UsageFilter selects usage rows; zero fields select everything.
type UsageFilter struct {
	// KeyIDs, when not nil, keeps only rows of these keys.
	KeyIDs []string
	// Since keeps rows of runs started at or after it; Until, when set,
	// those started before it.
	Since time.Time
	Until time.Time
	// Runtime and Outcome, when set, keep only rows of that runtime or
	// outcome.
	Runtime string
	Outcome string
	// Limit caps how many rows are returned (the newest); 0 means no cap.
	Limit int
}

// UsageSummary totals the runs of one key.
type UsageSummary struct {
	KeyID    string
	Runs     int64
	Duration time.Duration
	BytesIn  int64
	BytesOut int64
	// Outcomes counts runs by outcome.
	Outcomes map[string]int64
}

// RecordUsage appends one usage row.
func (s *Store) RecordUsage(ctx context.Context, u Usage) error {
	if u.Worker == "" {
		u.Worker = LocalWorker
	}
	_, err := s.db.exec(ctx, `INSERT INTO usage (key_id, runtime, worker, started_ms, duration_ms, exit_code, outcome, bytes_in, bytes_out)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, u.KeyID, u.Runtime, u.Worker, u.Started.UnixMilli(), u.Duration.Milliseconds(), u.ExitCode, u.Outcome, u.BytesIn, u.BytesOut)
	if err != nil {
		return fmt.Errorf("record usage: %w", err)
	}
	return nil
}

// ListUsage returns the selected rows, oldest first.
func (s *Store) ListUsage(ctx context.Context, f UsageFilter) ([]Usage, error) {
	where, args := f.where()
	q := `SELECT key_id, runtime, worker, started_ms, duration_ms, exit_code, outcome, bytes_in, bytes_out FROM usage` + where + ` ORDER BY started_ms DESC, id DESC`
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	rs, err := s.db.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list usage: %w", err)
	}
	defer rs.Close()
	var out []Usage
	for rs.Next() {
		var u Usage
		var started, durMS int64
		if err := rs.Scan(&u.KeyID, &u.Runtime, &u.Worker, &started, &durMS, &u.ExitCode, &u.Outcome, &u.BytesIn, &u.BytesOut); err != nil {
			return nil, fmt.Errorf("list usage: %w", err)
		}
		u.Started = time.UnixMilli(started)
		u.Duration = time.Duration(durMS) * time.Millisecond
		out = append(out, u)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("list usage: %w", err)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// SummarizeUsage totals the selected rows per key, ordered by key id.
func (s *Store) SummarizeUsage(ctx context.Context, f UsageFilter) ([]UsageSummary, error) {
	where, args := f.where()
	// Sums are cast: PostgreSQL's SUM of a BIGINT is a NUMERIC.
	rs, err := s.db.query(ctx, `SELECT key_id, outcome, COUNT(*), CAST(SUM(duration_ms) AS BIGINT), CAST(SUM(bytes_in) AS BIGINT), CAST(SUM(bytes_out) AS BIGINT)
		FROM usage`+where+` GROUP BY key_id, outcome ORDER BY key_id, outcome`, args...)
	if err != nil {
		return nil, fmt.Errorf("summarize usage: %w", err)
	}
	defer rs.Close()
	var out []UsageSummary
	for rs.Next() {
		var key, outcome string
		var n, durMS, in, bytesOut int64
		if err := rs.Scan(&key, &outcome, &n, &durMS, &in, &bytesOut); err != nil {
			return nil, fmt.Errorf("summarize usage: %w", err)
		}
		if len(out) == 0 || out[len(out)-1].KeyID != key {
			out = append(out, UsageSummary{KeyID: key, Outcomes: map[string]int64{}})
		}
		sum := &out[len(out)-1]
		sum.Runs += n
		sum.Duration += time.Duration(durMS) * time.Millisecond
		sum.BytesIn += in
		sum.BytesOut += bytesOut
		sum.Outcomes[outcome] += n
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("summarize usage: %w", err)
	}
	return out, nil
}

// where is the filter as SQL over the usage table.
func (f UsageFilter) where() (string, []any) {
	return f.whereOn("started_ms", true)
}

// whereOn is the filter as SQL over a table whose time column is timeCol;
// withRun false leaves out the conditions on a run's runtime and outcome,
// which a table of refusals does not have.
func (f UsageFilter) whereOn(timeCol string, withRun bool) (string, []any) {
	var conds []string
	var args []any
	if f.KeyIDs != nil {
		if len(f.KeyIDs) == 0 {
			conds = append(conds, "1 = 0")
		} else {
			conds = append(conds, "key_id IN ("+placeholders(len(f.KeyIDs))+")")
			for _, id := range f.KeyIDs {
				args = append(args, id)
			}
		}
	}
	if !f.Since.IsZero() {
		conds = append(conds, timeCol+" >= ?")
		args = append(args, f.Since.UnixMilli())
	}
	if !f.Until.IsZero() {
		conds = append(conds, timeCol+" < ?")
		args = append(args, f.Until.UnixMilli())
	}
	if withRun && f.Runtime != "" {
		conds = append(conds, "runtime = ?")
		args = append(args, f.Runtime)
	}
	if withRun && f.Outcome != "" {
		conds = append(conds, "outcome = ?")
		args = append(args, f.Outcome)
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// placeholders is "?, ?, ..." for n values.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
