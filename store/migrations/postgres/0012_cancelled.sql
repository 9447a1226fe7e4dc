-- A run its caller stopped ({"cancel": ...}, a client's cancellation, a
-- server that stopped) is cancelled, no longer failed.
-- The PostgreSQL twin of migrations/0012_cancelled.sql.

ALTER TABLE runs DROP CONSTRAINT runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check
	CHECK (status IN ('running', 'success', 'failed', 'partial', 'interrupted', 'cancelled'));
