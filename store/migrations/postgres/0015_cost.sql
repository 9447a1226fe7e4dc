-- The PostgreSQL twin of migrations/0015_cost.sql.

ALTER TABLE runs ADD COLUMN cost_usd DOUBLE PRECISION;
