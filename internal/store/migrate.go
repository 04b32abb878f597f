package store

import (
	"context"
	"fmt"
)

// migrations are applied in order; migrations[i] brings the schema from
// version i to i+1. Never edit one that has shipped: append a new one.
var migrations = []string{
	`CREATE TABLE keys (
		id           TEXT PRIMARY KEY,
		name         TEXT NOT NULL,
		hash         TEXT NOT NULL UNIQUE,
		prefix       TEXT NOT NULL,
		rate_per_min INTEGER NOT NULL,
		concurrency  INTEGER NOT NULL,
		created_ms   INTEGER NOT NULL,
		revoked_ms   INTEGER
	);
	CREATE UNIQUE INDEX keys_active_name ON keys(name) WHERE revoked_ms IS NULL;
	CREATE TABLE usage (
		id          INTEGER PRIMARY KEY,
		key_id      TEXT NOT NULL,
		runtime     TEXT NOT NULL,
		started_ms  INTEGER NOT NULL,
		duration_ms INTEGER NOT NULL,
		exit_code   INTEGER NOT NULL,
		outcome     TEXT NOT NULL,
		bytes_in    INTEGER NOT NULL,
		bytes_out   INTEGER NOT NULL
	);
	CREATE INDEX usage_key_started ON usage(key_id, started_ms);
	CREATE INDEX usage_started ON usage(started_ms);`,
}

// migrate brings the schema to the latest version in one immediate
// transaction, so two processes opening a new file at once cannot both apply
// a migration.
func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin migration: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("create version table: %w", err)
	}
	var version int
	err = tx.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&version)
	switch {
	case err == nil:
	case isNoRows(err):
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (0)`); err != nil {
			return fmt.Errorf("initialise version: %w", err)
		}
	default:
		return fmt.Errorf("read schema version: %w", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this binary knows (%d): upgrade scratchrun", version, len(migrations))
	}
	for v := version; v < len(migrations); v++ {
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			return fmt.Errorf("migrate schema to version %d: %w", v+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE schema_version SET version = ?`, len(migrations)); err != nil {
		return fmt.Errorf("record schema version: %w", err)
	}
	return tx.Commit()
}
