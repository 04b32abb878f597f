package store

// The schema, per database, as migrations: migrations[i] brings it from
// version i to i+1, applied in order at Open and recorded in the table
// schema_version. Never edit one that has shipped: append a new one. The two
// lists keep the same versions, so that version N means the same tables in
// both. Times are integers (milliseconds, or microseconds where leases and
// buckets need them) in both, so that one SQL serves both.

var sqliteMigrations = []string{
	// 1: keys and usage.
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
	// 2: limits shared by front ends (rate buckets, concurrency leases);
	// the worker of each run.
	`ALTER TABLE usage ADD COLUMN worker TEXT NOT NULL DEFAULT 'local';
	CREATE TABLE rate_buckets (
		key_id TEXT PRIMARY KEY,
		tokens REAL NOT NULL,
		at_us  INTEGER NOT NULL
	);
	CREATE TABLE leases (
		id            INTEGER PRIMARY KEY,
		key_id        TEXT NOT NULL,
		expires_us    INTEGER NOT NULL,
		expect_end_us INTEGER NOT NULL
	);
	CREATE INDEX leases_key ON leases(key_id, expires_us);`,
	// 3: refusals per key, reason and minute (the console's "refused"
	// beside the runs' outcomes): one row per minute, however many calls a
	// key has refused in it.
	`CREATE TABLE refusals (
		key_id    TEXT NOT NULL,
		minute_ms INTEGER NOT NULL,
		reason    TEXT NOT NULL,
		n         INTEGER NOT NULL,
		PRIMARY KEY (key_id, minute_ms, reason)
	);
	CREATE INDEX refusals_minute ON refusals(minute_ms);`,
}

var postgresMigrations = []string{
	// 1: keys and usage.
	`CREATE TABLE keys (
		id           TEXT PRIMARY KEY,
		name         TEXT NOT NULL,
		hash         TEXT NOT NULL UNIQUE,
		prefix       TEXT NOT NULL,
		rate_per_min INTEGER NOT NULL,
		concurrency  INTEGER NOT NULL,
		created_ms   BIGINT NOT NULL,
		revoked_ms   BIGINT
	);
	CREATE UNIQUE INDEX keys_active_name ON keys(name) WHERE revoked_ms IS NULL;
	CREATE TABLE usage (
		id          BIGSERIAL PRIMARY KEY,
		key_id      TEXT NOT NULL,
		runtime     TEXT NOT NULL,
		started_ms  BIGINT NOT NULL,
		duration_ms BIGINT NOT NULL,
		exit_code   INTEGER NOT NULL,
		outcome     TEXT NOT NULL,
		bytes_in    BIGINT NOT NULL,
		bytes_out   BIGINT NOT NULL
	);
	CREATE INDEX usage_key_started ON usage(key_id, started_ms);
	CREATE INDEX usage_started ON usage(started_ms);`,
	// 2: limits shared by front ends (rate buckets, concurrency leases);
	// the worker of each run.
	`ALTER TABLE usage ADD COLUMN worker TEXT NOT NULL DEFAULT 'local';
	CREATE TABLE rate_buckets (
		key_id TEXT PRIMARY KEY,
		tokens DOUBLE PRECISION NOT NULL,
		at_us  BIGINT NOT NULL
	);
	CREATE TABLE leases (
		id            BIGSERIAL PRIMARY KEY,
		key_id        TEXT NOT NULL,
		expires_us    BIGINT NOT NULL,
		expect_end_us BIGINT NOT NULL
	);
	CREATE INDEX leases_key ON leases(key_id, expires_us);`,
	// 3: refusals per key, reason and minute (the console's "refused"
	// beside the runs' outcomes): one row per minute, however many calls a
	// key has refused in it.
	`CREATE TABLE refusals (
		key_id    TEXT NOT NULL,
		minute_ms BIGINT NOT NULL,
		reason    TEXT NOT NULL,
		n         BIGINT NOT NULL,
		PRIMARY KEY (key_id, minute_ms, reason)
	);
	CREATE INDEX refusals_minute ON refusals(minute_ms);`,
}
