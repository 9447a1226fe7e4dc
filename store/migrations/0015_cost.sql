-- What a run's model calls cost in US dollars, from the configuration's
-- pricing: its planner's, its agents', or an agent run's model turns.
-- NULL when a model it called has no price (or it called none): no cost
-- is known, which is not a cost of 0.

ALTER TABLE runs ADD COLUMN cost_usd REAL;
