-- Conversations: the turns (a goal and its answer) of the prompt-path runs
-- a caller named with a context id. They are scoped like the records of
-- runs: owner is the caller ('' for the machine's own callers) and tenant
-- its tenant ('' without tenants); the same context id from another caller
-- is another conversation. seq orders a conversation's turns; at is when
-- the turn was added (Unix nanoseconds, UTC).

CREATE TABLE conversation_turns (
	owner      TEXT    NOT NULL DEFAULT '',
	tenant     TEXT    NOT NULL DEFAULT '',
	context_id TEXT    NOT NULL,
	seq        INTEGER NOT NULL,
	goal       TEXT    NOT NULL,
	answer     TEXT    NOT NULL,
	exec_id    TEXT    NOT NULL DEFAULT '',
	at         INTEGER NOT NULL,
	PRIMARY KEY (owner, tenant, context_id, seq)
);

CREATE INDEX conversation_turns_by_at ON conversation_turns (at);
