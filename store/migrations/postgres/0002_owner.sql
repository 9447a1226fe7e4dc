-- Runs belong to the caller that started them: owner identifies the
-- caller's credential ('' for the machine's own callers), so that a reader
-- sees only its own runs. The store instance that runs them, which crash
-- recovery needs and which was called owner, is now called instance.
-- The PostgreSQL twin of migrations/0002_owner.sql.

ALTER TABLE runs RENAME COLUMN owner TO instance;
DROP INDEX runs_running_by_owner;
CREATE INDEX runs_running_by_instance ON runs (instance) WHERE status = 'running';

ALTER TABLE runs ADD COLUMN owner TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_by_owner_start ON runs (owner, started_at DESC, seq DESC);
