-- A run its caller stopped ({"cancel": ...}, a client's cancellation, a
-- server that stopped) is cancelled, no longer failed. SQLite cannot
-- change a CHECK constraint in place: before this file runs, the table
-- runs is rebuilt with 'cancelled' among its statuses, every column, index
-- and row kept (sqliteRebuilds in migrate.go).

SELECT 1;
