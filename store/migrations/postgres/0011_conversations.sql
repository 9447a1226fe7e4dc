-- Conversations: the turns of the prompt-path runs a caller named with a
-- context id, scoped by owner and tenant; times are Unix nanoseconds
-- (BIGINT). The PostgreSQL twin of migrations/0011_conversations.sql.

CREATE TABLE conversation_turns (
	owner      TEXT    NOT NULL DEFAULT '',
	tenant     TEXT    NOT NULL DEFAULT '',
	context_id TEXT    NOT NULL,
	seq        BIGINT  NOT NULL,
	goal       TEXT    NOT NULL,
	answer     TEXT    NOT NULL,
	exec_id    TEXT    NOT NULL DEFAULT '',
	at         BIGINT  NOT NULL,
	PRIMARY KEY (owner, tenant, context_id, seq)
);

CREATE INDEX conversation_turns_by_at ON conversation_turns (at);
