-- Workflows: plans kept under a name, with parameters (their bindings)
-- and a version, called again as the tool workflow__<name> with no model.
-- They are scoped like the records of runs: owner is the caller that saved
-- it ('' for the machine's own callers) and tenant its tenant ('' without
-- tenants). Saving a name again adds a version; calls use the newest.
-- The PostgreSQL twin of migrations/0013_workflows.sql. Times are Unix nanoseconds (UTC).

CREATE TABLE workflows (
	owner       TEXT    NOT NULL DEFAULT '',
	tenant      TEXT    NOT NULL DEFAULT '',
	name        TEXT    NOT NULL,
	version     BIGINT  NOT NULL,
	description TEXT    NOT NULL DEFAULT '',
	parameters  TEXT    NOT NULL, -- the JSON Schema of the parameters
	plan        TEXT    NOT NULL, -- the normalized plan, as JSON
	saved_from  TEXT    NOT NULL DEFAULT '', -- the exec id of the run it was saved from, if any
	created_at  BIGINT  NOT NULL,
	PRIMARY KEY (owner, tenant, name, version)
);

CREATE INDEX workflows_by_name ON workflows (name, version DESC);
