-- Insights: lessons distilled from past runs, per tool (a validation error
-- the planner's repair fixed, a tool error and the arguments that caused it,
-- a timeout, a one-sentence reflection on a failed run). They are scoped like
-- the records of runs: owner is the caller ('' for the machine's own
-- callers) and tenant its tenant ('' without tenants). One row per (owner,
-- tenant, tool, key): a lesson seen again is counted, not repeated. Times are Unix nanoseconds (UTC).

CREATE TABLE insights (
	owner      TEXT    NOT NULL DEFAULT '',
	tenant     TEXT    NOT NULL DEFAULT '',
	tool       TEXT    NOT NULL,
	key        TEXT    NOT NULL, -- what makes two lessons the same: kind, argument, error code
	kind       TEXT    NOT NULL, -- repair, tool_error, timeout, reflection
	lesson     TEXT    NOT NULL,
	count      INTEGER NOT NULL DEFAULT 1,
	first_seen INTEGER NOT NULL,
	last_seen  INTEGER NOT NULL,
	PRIMARY KEY (owner, tenant, tool, key)
);

CREATE INDEX insights_by_last_seen ON insights (last_seen);
