-- Who a run is for, and who keeps it alive. user_id is the authenticated
-- subject (a token's name, a JWT's sub); tenant is the tenant the caller
-- belongs to ('' without tenants). lease_until (Unix nanoseconds) is how
-- long the replica running a run vouches for it: on a shared database a
-- run whose lease lapsed belongs to a replica that stopped renewing it.

ALTER TABLE runs ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN lease_until INTEGER;
CREATE INDEX runs_by_tenant_start ON runs (tenant, started_at DESC, seq DESC);
CREATE INDEX runs_running_by_lease ON runs (lease_until) WHERE status = 'running';
