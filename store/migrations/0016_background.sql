-- Background runs ("background": true): runs that go on without their
-- caller. On PostgreSQL any replica takes one up whose replica died (its
-- lease lapsed, and it was marked interrupted), with the request that
-- resumable keeps, and a cancel asked on one replica reaches the replica
-- that runs the run through cancel_at. A row lives while its run does:
-- the replica that ends the run deletes it.
-- Portable SQL: a PostgreSQL twin says the same.

CREATE TABLE background (
	exec_id     TEXT    NOT NULL PRIMARY KEY REFERENCES runs (exec_id) ON DELETE CASCADE,
	queued_at   INTEGER NOT NULL,           -- when the run was accepted, Unix nanoseconds
	cancel_at   INTEGER,                    -- when a cancel was asked, Unix nanoseconds; NULL while none was
	takeovers   INTEGER NOT NULL DEFAULT 0, -- how often a replica took it up after the one running it died
	taken_until INTEGER                     -- the last takeover's lease, Unix nanoseconds: no other replica takes the run up before
);

-- The runs to take up first: never taken, or taken longest ago.
CREATE INDEX background_by_turn ON background (coalesce(taken_until, 0), queued_at) WHERE cancel_at IS NULL;
