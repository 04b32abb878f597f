package store

import "strings"

// The schema, as migrations: schema[i] brings it from version i to i+1,
// applied in order at Open and recorded in the table schema_version. Never
// edit one that has shipped: append a new one. It is written once for both
// databases, with a placeholder where they spell a column type differently
// (columnTypes), so that version N means the same tables in both. Times
// are integers (milliseconds, or microseconds where leases and buckets need
// them) in both, so that one SQL serves both.
var schema = []string{
	// 1: keys and usage.
	`CREATE TABLE keys (
		id           TEXT PRIMARY KEY,
		name         TEXT NOT NULL,
		hash         TEXT NOT NULL UNIQUE,
		prefix       TEXT NOT NULL,
		rate_per_min INTEGER NOT NULL,
		concurrency  INTEGER NOT NULL,
		created_ms   {bigint} NOT NULL,
		revoked_ms   {bigint}
	);
	CREATE UNIQUE INDEX keys_active_name ON keys(name) WHERE revoked_ms IS NULL;
	CREATE TABLE usage (
		id          {serial} PRIMARY KEY,
		key_id      TEXT NOT NULL,
		runtime     TEXT NOT NULL,
		started_ms  {bigint} NOT NULL,
		duration_ms {bigint} NOT NULL,
		exit_code   INTEGER NOT NULL,
		outcome     TEXT NOT NULL,
		bytes_in    {bigint} NOT NULL,
		bytes_out   {bigint} NOT NULL
	);
	CREATE INDEX usage_key_started ON usage(key_id, started_ms);
	CREATE INDEX usage_started ON usage(started_ms);`,
	// 2: limits shared by front ends (rate buckets, concurrency leases);
	// the worker of each run.
	`ALTER TABLE usage ADD COLUMN worker TEXT NOT NULL DEFAULT 'local';
	CREATE TABLE rate_buckets (
		key_id TEXT PRIMARY KEY,
		tokens {double} NOT NULL,
		at_us  {bigint} NOT NULL
	);
	CREATE TABLE leases (
		id            {serial} PRIMARY KEY,
		key_id        TEXT NOT NULL,
		expires_us    {bigint} NOT NULL,
		expect_end_us {bigint} NOT NULL
	);
	CREATE INDEX leases_key ON leases(key_id, expires_us);`,
	// 3: refusals per key, reason and minute (the console's "refused"
	// beside the runs' outcomes): one row per minute, however many calls a
	// key has refused in it.
	`CREATE TABLE refusals (
		key_id    TEXT NOT NULL,
		minute_ms {bigint} NOT NULL,
		reason    TEXT NOT NULL,
		n         {bigint} NOT NULL,
		PRIMARY KEY (key_id, minute_ms, reason)
	);
	CREATE INDEX refusals_minute ON refusals(minute_ms);`,
	// 4: the built-in OAuth authorization server (package
	// oauth/authserver): registered clients, authorization requests and
	// their codes, refresh tokens (by hash, in families that are one grant
	// each), and the key that signs access tokens, so that every front end
	// sharing the database issues and accepts the same tokens.
	`CREATE TABLE oauth_clients (
		id         TEXT PRIMARY KEY,
		metadata   TEXT NOT NULL,
		created_ms {bigint} NOT NULL
	);
	CREATE TABLE oauth_auth_requests (
		id         TEXT PRIMARY KEY,
		data       TEXT NOT NULL,
		code_hash  TEXT UNIQUE,
		code_used  INTEGER NOT NULL DEFAULT 0,
		expires_ms {bigint} NOT NULL
	);
	CREATE INDEX oauth_auth_requests_expires ON oauth_auth_requests(expires_ms);
	CREATE TABLE oauth_refresh_tokens (
		hash       TEXT PRIMARY KEY,
		family     TEXT NOT NULL,
		key_id     TEXT NOT NULL,
		client_id  TEXT NOT NULL,
		data       TEXT NOT NULL,
		used       INTEGER NOT NULL DEFAULT 0,
		expires_ms {bigint} NOT NULL
	);
	CREATE INDEX oauth_refresh_family ON oauth_refresh_tokens(family);
	CREATE INDEX oauth_refresh_expires ON oauth_refresh_tokens(expires_ms);
	CREATE TABLE oauth_signing_keys (
		slot        TEXT PRIMARY KEY,
		kid         TEXT NOT NULL,
		alg         TEXT NOT NULL,
		private_pem TEXT NOT NULL,
		created_ms  {bigint} NOT NULL
	);`,
	// 5: idempotent retries (sql_idempotency.go): one entry per caller and
	// Idempotency-Key, "running" from before its run is admitted, then
	// "done" with the answer, kept for a window from the first request.
	`CREATE TABLE idempotency (
		caller       TEXT NOT NULL,
		idem_key     TEXT NOT NULL,
		body_hash    TEXT NOT NULL,
		state        TEXT NOT NULL,
		status       INTEGER NOT NULL DEFAULT 0,
		content_type TEXT NOT NULL DEFAULT '',
		body         {blob},
		created_ms   {bigint} NOT NULL,
		expires_ms   {bigint} NOT NULL,
		PRIMARY KEY (caller, idem_key)
	);
	CREATE INDEX idempotency_expires ON idempotency(expires_ms);`,
	// 6: code sessions (sql_sessions.go): one row per session, by the
	// hash of its id, open until ended_ms is set; ended rows are kept a
	// while as tombstones, so that the owner's next use hears why.
	`CREATE TABLE code_sessions (
		id_hash       TEXT PRIMARY KEY,
		owner         TEXT NOT NULL,
		server        TEXT NOT NULL,
		worker        TEXT NOT NULL DEFAULT '',
		runtime       TEXT NOT NULL,
		created_ms    {bigint} NOT NULL,
		expires_ms    {bigint} NOT NULL,
		ended_ms      {bigint},
		end_reason    TEXT NOT NULL DEFAULT '',
		end_requested INTEGER NOT NULL DEFAULT 0
	);
	CREATE INDEX code_sessions_owner ON code_sessions(owner, ended_ms);
	CREATE INDEX code_sessions_server ON code_sessions(server, worker, ended_ms);
	CREATE INDEX code_sessions_ended ON code_sessions(ended_ms);`,
}

// columnTypes is how a database spells the column types the two name
// differently.
type columnTypes struct {
	// bigint is a 64-bit integer (every SQLite INTEGER is one).
	bigint string
	// serial is a 64-bit key numbered by the database (in SQLite, an
	// INTEGER PRIMARY KEY is the row id).
	serial string
	// double is a double-precision float.
	double string
	// blob is a string of bytes.
	blob string
}

var (
	sqliteMigrations   = columnTypes{bigint: "INTEGER", serial: "INTEGER", double: "REAL", blob: "BLOB"}.migrations()
	postgresMigrations = columnTypes{bigint: "BIGINT", serial: "BIGSERIAL", double: "DOUBLE PRECISION", blob: "BYTEA"}.migrations()
)

// migrations is the schema in c's spelling.
func (c columnTypes) migrations() []string {
	spell := strings.NewReplacer("{bigint}", c.bigint, "{serial}", c.serial, "{double}", c.double, "{blob}", c.blob)
	out := make([]string, len(schema))
	for i, m := range schema {
		out[i] = spell.Replace(m)
	}
	return out
}
