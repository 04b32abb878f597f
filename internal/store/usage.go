package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Usage is one run, as accounted.
type Usage struct {
	// KeyID is the key that asked for the run; empty when the server ran
	// without keys.
	KeyID   string
	Runtime string
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

// RecordUsage appends one usage row.
func (s *Store) RecordUsage(ctx context.Context, u Usage) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO usage (key_id, runtime, started_ms, duration_ms, exit_code, outcome, bytes_in, bytes_out)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, u.KeyID, u.Runtime, u.Started.UnixMilli(), u.Duration.Milliseconds(), u.ExitCode, u.Outcome, u.BytesIn, u.BytesOut)
	if err != nil {
		return fmt.Errorf("record usage: %w", err)
	}
	return nil
}

// UsageFilter selects usage rows; zero fields select everything.
type UsageFilter struct {
	// KeyIDs, when not nil, keeps only rows of these keys.
	KeyIDs []string
	// Since keeps rows of runs started at or after it.
	Since time.Time
	// Limit caps how many rows are returned (the newest); 0 means no cap.
	Limit int
}

// ListUsage returns the selected rows, oldest first.
func (s *Store) ListUsage(ctx context.Context, f UsageFilter) ([]Usage, error) {
	where, args := f.where()
	q := `SELECT key_id, runtime, started_ms, duration_ms, exit_code, outcome, bytes_in, bytes_out FROM usage` + where + ` ORDER BY started_ms DESC, id DESC`
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list usage: %w", err)
	}
	defer rows.Close()
	var out []Usage
	for rows.Next() {
		var u Usage
		var started, durMS int64
		if err := rows.Scan(&u.KeyID, &u.Runtime, &started, &durMS, &u.ExitCode, &u.Outcome, &u.BytesIn, &u.BytesOut); err != nil {
			return nil, fmt.Errorf("list usage: %w", err)
		}
		u.Started = time.UnixMilli(started)
		u.Duration = time.Duration(durMS) * time.Millisecond
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list usage: %w", err)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
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

// SummarizeUsage totals the selected rows per key, ordered by key id.
func (s *Store) SummarizeUsage(ctx context.Context, f UsageFilter) ([]UsageSummary, error) {
	where, args := f.where()
	rows, err := s.db.QueryContext(ctx, `SELECT key_id, outcome, COUNT(*), SUM(duration_ms), SUM(bytes_in), SUM(bytes_out)
		FROM usage`+where+` GROUP BY key_id, outcome ORDER BY key_id, outcome`, args...)
	if err != nil {
		return nil, fmt.Errorf("summarize usage: %w", err)
	}
	defer rows.Close()
	var out []UsageSummary
	for rows.Next() {
		var key, outcome string
		var n, durMS, in, bytesOut int64
		if err := rows.Scan(&key, &outcome, &n, &durMS, &in, &bytesOut); err != nil {
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
	return out, rows.Err()
}

func (f UsageFilter) where() (string, []any) {
	var conds []string
	var args []any
	if f.KeyIDs != nil {
		if len(f.KeyIDs) == 0 {
			conds = append(conds, "0")
		} else {
			conds = append(conds, "key_id IN ("+strings.TrimSuffix(strings.Repeat("?,", len(f.KeyIDs)), ",")+")")
			for _, id := range f.KeyIDs {
				args = append(args, id)
			}
		}
	}
	if !f.Since.IsZero() {
		conds = append(conds, "started_ms >= ?")
		args = append(args, f.Since.UnixMilli())
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}
