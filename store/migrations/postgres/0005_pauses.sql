-- Runs that can go on: a run paused for its client (client-final tools),
-- and the request a run needs to be resumed after it was interrupted or
-- failed. pauses is the history of every pause and resume of a run.
-- The PostgreSQL twin of migrations/0005_pauses.sql.

CREATE TABLE resumable (
	exec_id    TEXT    NOT NULL PRIMARY KEY REFERENCES runs (exec_id) ON DELETE CASCADE,
	request    TEXT    NOT NULL,            -- the plan, bindings, client tools and limits, as JSON
	paused     INTEGER NOT NULL DEFAULT 0,  -- 1 while the run waits for its client
	pending    TEXT,                        -- the calls it waits for, as JSON, while paused
	expires_at BIGINT,                      -- when the pause ends, Unix nanoseconds
	claims     BIGINT  NOT NULL DEFAULT 0   -- how often it was taken up again; a resume claims it once
);

CREATE INDEX resumable_paused ON resumable (exec_id) WHERE paused = 1;

CREATE TABLE pauses (
	exec_id TEXT    NOT NULL REFERENCES runs (exec_id) ON DELETE CASCADE,
	seq     BIGINT  NOT NULL,  -- 1, 2, ... within the run
	event   TEXT    NOT NULL CHECK (event IN ('paused', 'resumed', 'expired')),
	at      BIGINT  NOT NULL,  -- Unix nanoseconds
	detail  TEXT,              -- JSON: the pending calls, or the steps whose results came
	PRIMARY KEY (exec_id, seq)
);
