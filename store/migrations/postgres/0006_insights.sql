-- Insights: lessons distilled from past runs, per tool; times are Unix
-- nanoseconds (BIGINT). The PostgreSQL twin of migrations/0006_insights.sql.

CREATE TABLE insights (
	owner      TEXT    NOT NULL DEFAULT '',
	tenant     TEXT    NOT NULL DEFAULT '',
	tool       TEXT    NOT NULL,
	key        TEXT    NOT NULL,
	kind       TEXT    NOT NULL,
	lesson     TEXT    NOT NULL,
	count      INTEGER NOT NULL DEFAULT 1,
	first_seen BIGINT  NOT NULL,
	last_seen  BIGINT  NOT NULL,
	PRIMARY KEY (owner, tenant, tool, key)
);

CREATE INDEX insights_by_last_seen ON insights (last_seen);
