-- Idempotent calls: one row per (owner, tenant, key); the primary key makes
-- one of several concurrent calls, on any replica, the one that runs. Times
-- are Unix nanoseconds (BIGINT).
-- The PostgreSQL twin of migrations/0014_idempotency.sql.

CREATE TABLE idempotency_keys (
	owner      TEXT    NOT NULL DEFAULT '',
	tenant     TEXT    NOT NULL DEFAULT '',
	key        TEXT    NOT NULL,
	hash       TEXT    NOT NULL,
	exec_id    TEXT    NOT NULL DEFAULT '',
	result     TEXT,
	claimed_at BIGINT  NOT NULL,
	expires_at BIGINT  NOT NULL,
	PRIMARY KEY (owner, tenant, key)
);

CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys (expires_at);
