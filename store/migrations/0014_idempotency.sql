-- Idempotent calls: one row per (owner, tenant, key) a caller sent as its
-- idempotency key. The primary key is what makes one call of several
-- concurrent ones (on several replicas, on PostgreSQL) the one that runs:
-- the others fail to insert and wait for its result. hash is the canonical
-- hash of the call's input; result is the tool result the repeats get,
-- NULL while the run is running. Times are Unix nanoseconds (UTC).

CREATE TABLE idempotency_keys (
	owner      TEXT    NOT NULL DEFAULT '',
	tenant     TEXT    NOT NULL DEFAULT '',
	key        TEXT    NOT NULL,
	hash       TEXT    NOT NULL,
	exec_id    TEXT    NOT NULL DEFAULT '',
	result     TEXT,
	claimed_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	PRIMARY KEY (owner, tenant, key)
);

CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys (expires_at);
