-- A run started by another run (an agent's run, started by a plan's agent
-- step) names the run that started it; '' for runs a caller started.
-- The PostgreSQL twin of migrations/0004_parent.sql.

ALTER TABLE runs ADD COLUMN parent_exec_id TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_by_parent ON runs (parent_exec_id) WHERE parent_exec_id <> '';
