-- Runs of agent_orchestrate (or the CLI) and the records of their steps.
-- Times are Unix nanoseconds (UTC); JSON bodies are stored as text.

CREATE TABLE runs (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT, -- insertion order; breaks ties between equal start times
	exec_id     TEXT    NOT NULL UNIQUE,
	request_id  TEXT    NOT NULL DEFAULT '',
	tool        TEXT    NOT NULL,
	status      TEXT    NOT NULL CHECK (status IN ('running', 'success', 'failed', 'partial', 'interrupted')),
	started_at  INTEGER NOT NULL,
	finished_at INTEGER,
	duration_ms INTEGER NOT NULL DEFAULT 0,
	plan        TEXT,
	envelope    TEXT,
	step_count  INTEGER NOT NULL DEFAULT 0,
	error       TEXT    NOT NULL DEFAULT '',
	owner       TEXT    NOT NULL DEFAULT '' -- the store instance that started the run, for crash recovery
);

CREATE INDEX runs_by_start ON runs (started_at DESC, seq DESC);
CREATE INDEX runs_by_status_start ON runs (status, started_at DESC, seq DESC);
CREATE INDEX runs_running_by_owner ON runs (owner) WHERE status = 'running';

CREATE TABLE steps (
	exec_id     TEXT    NOT NULL REFERENCES runs (exec_id) ON DELETE CASCADE,
	step_id     TEXT    NOT NULL,
	idx         INTEGER NOT NULL DEFAULT 0,
	path        TEXT    NOT NULL DEFAULT '',
	tool        TEXT    NOT NULL DEFAULT '',
	status      TEXT    NOT NULL,
	started_at  INTEGER,
	duration_ms INTEGER NOT NULL DEFAULT 0,
	attempts    INTEGER NOT NULL DEFAULT 0,
	output      TEXT,
	error       TEXT,
	PRIMARY KEY (exec_id, step_id)
) WITHOUT ROWID;
