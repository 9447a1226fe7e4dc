-- What the viewer of runs shows without reading a run's bodies: a run's
-- goal (the prompt of the prompt path) or its first step ("id (tool)"),
-- and the model tokens its envelope counts (the planner's, its agents',
-- an agent run's model turns); a step's kind (tool, agent, parallel,
-- for_each, model) and its arguments as resolved, written as it starts so
-- that a running step shows them.
-- The PostgreSQL twin of migrations/0007_viewer.sql.

ALTER TABLE runs ADD COLUMN goal TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN first_step TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN tokens_in BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN tokens_out BIGINT NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN kind TEXT NOT NULL DEFAULT '';
ALTER TABLE steps ADD COLUMN arguments TEXT;
-- The list of the runs callers started (not their agents' runs), newest first.
CREATE INDEX runs_roots_by_start ON runs (started_at DESC, seq DESC) WHERE parent_exec_id = '';
