package store

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/orchestra-mcp/orchestra/testutil/pgtest"
)

func TestMigrateEmptyDatabase(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, tempDB(t), Options{})
	v, err := schemaVersion(ctx, s.reader, s.pg)
	if err != nil {
		t.Fatal(err)
	}
	if v != latestVersion() || v < 1 {
		t.Errorf("schema version %d, want %d", v, latestVersion())
	}
	for _, table := range []string{"runs", "steps", "schema_migrations"} {
		var n int
		if err := s.reader.QueryRowContext(ctx,
			`SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?`, table).Scan(&n); err != nil || n != 1 {
			t.Errorf("table %s: count %d, %v", table, n, err)
		}
	}
	// Migrating again changes nothing.
	if err := s.migrate(ctx, migrations); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := s.reader.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&rows); err != nil || rows != len(migrations) {
		t.Errorf("schema_migrations has %d rows, %v; want %d", rows, err, len(migrations))
	}
}

func TestMigrateUpgrade(t *testing.T) {
	ctx := t.Context()
	path := tempDB(t)
	s := openTest(t, path, Options{})
	if err := s.StartRun(ctx, Run{ExecID: "old", Tool: "cli"}); err != nil {
		t.Fatal(err)
	}
	next := migration{
		version: latestVersion() + 1,
		name:    "9999_label",
		sql:     `ALTER TABLE runs ADD COLUMN label TEXT NOT NULL DEFAULT ''; CREATE INDEX runs_by_label ON runs (label);`,
	}
	if err := s.migrate(ctx, append(migrations[:len(migrations):len(migrations)], next)); err != nil {
		t.Fatal(err)
	}
	var label string
	if err := s.reader.QueryRowContext(ctx, `SELECT label FROM runs WHERE exec_id = 'old'`).Scan(&label); err != nil {
		t.Fatalf("new column: %v", err)
	}
	// The code without the new migration now refuses the database.
	if err := s.migrate(ctx, migrations); !errors.Is(err, ErrSchemaTooNew) {
		t.Errorf("migrate with older code = %v, want ErrSchemaTooNew", err)
	}
}

func TestMigrateFailureRollsBack(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, Memory, Options{})
	bad := migration{version: latestVersion() + 1, name: "bad", sql: `CREATE TABLE t (x); SELECT nonsense FROM nowhere;`}
	if err := s.migrate(ctx, append(migrations[:len(migrations):len(migrations)], bad)); err == nil {
		t.Fatal("a failing migration succeeded")
	}
	var n int
	if err := s.reader.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE name = 't'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("half-applied migration left table t: %d, %v", n, err)
	}
	if v, err := schemaVersion(ctx, s.reader, s.pg); err != nil || v != latestVersion() {
		t.Errorf("schema version %d, %v", v, err)
	}
}

func TestOpenRefusesFutureSchema(t *testing.T) {
	ctx := t.Context()
	path := tempDB(t)
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db := rawOpen(t, path)
	if _, err := db.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, '0999_future', 0)`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	_, err = Open(ctx, path, Options{})
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("Open = %v, want ErrSchemaTooNew", err)
	}
	t.Log(err)
}

func TestLoadMigrations(t *testing.T) {
	good := fstest.MapFS{
		"migrations/0001_a.sql": {Data: []byte("CREATE TABLE a (x);")},
		"migrations/0002_b.sql": {Data: []byte("CREATE TABLE b (x);")},
	}
	if ms := loadMigrations(good, "migrations"); len(ms) != 2 || ms[1].version != 2 || ms[1].name != "0002_b" {
		t.Errorf("loadMigrations = %+v", ms)
	}
	gap := fstest.MapFS{
		"migrations/0001_a.sql": {Data: []byte("")},
		"migrations/0003_c.sql": {Data: []byte("")},
	}
	if ms := loadMigrations(gap, "migrations"); len(ms) != 2 || ms[1].version != 3 {
		t.Errorf("loadMigrations with a gap = %+v", ms)
	}
	dup := fstest.MapFS{
		"migrations/0001_a.sql": {Data: []byte("")},
		"migrations/0001_b.sql": {Data: []byte("")},
	}
	defer func() {
		if recover() == nil {
			t.Error("two migrations with one number did not panic")
		}
	}()
	loadMigrations(dup, "migrations")
}

// TestMigrateFillsAGap applies a migration whose number is below the
// database's newest one, as when changes numbered side by side land in a
// different order.
func TestMigrateFillsAGap(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, Memory, Options{})
	v := latestVersion()
	first := []migration{{version: v + 2, name: "late_b", sql: `CREATE TABLE late_b (x);`}}
	if err := s.migrate(ctx, append(migrations[:len(migrations):len(migrations)], first...)); err != nil {
		t.Fatal(err)
	}
	both := append(migrations[:len(migrations):len(migrations)],
		migration{version: v + 1, name: "late_a", sql: `CREATE TABLE late_a (x);`}, first[0])
	if err := s.migrate(ctx, both); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"late_a", "late_b"} {
		var n int
		if err := s.reader.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE name = ?`, table).Scan(&n); err != nil || n != 1 {
			t.Errorf("table %s: %d, %v", table, n, err)
		}
	}
}

// latestVersion is the number of the newest embedded migration.
func latestVersion() int { return migrations[len(migrations)-1].version }

// rawOpen opens the database file directly, bypassing the store.
func rawOpen(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", sqliteURI(path)+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PingContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestMigrationLogLevel logs the migrations that make a new or in-memory
// store at debug, and those that upgrade a store with records at info: a
// command's first run says nothing about its database, an upgrade does.
func TestMigrationLogLevel(t *testing.T) {
	ctx := t.Context()
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	path := tempDB(t)
	for _, p := range []string{Memory, path} {
		s := openTest(t, p, Options{Logger: log})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	got := logs.String()
	if n := strings.Count(got, `level=DEBUG msg="applied execution store migration"`); n != 2*len(migrations) || strings.Contains(got, "level=INFO") {
		t.Errorf("a new and an in-memory store: %d migrations logged at debug, want %d, and none at info:\n%s", n, 2*len(migrations), got)
	}

	logs = &lockedBuffer{}
	log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := openTest(t, path, Options{Logger: log})
	next := migration{version: latestVersion() + 1, name: "9999_label", sql: `ALTER TABLE runs ADD COLUMN label TEXT NOT NULL DEFAULT '';`}
	if err := s.migrate(ctx, append(migrations[:len(migrations):len(migrations)], next)); err != nil {
		t.Fatal(err)
	}
	if got := logs.String(); !strings.Contains(got, `level=INFO msg="applied execution store migration" version=`+strconv.Itoa(next.version)) {
		t.Errorf("upgrading a store: the migration is not logged at info:\n%s", got)
	}
}

// TestMigrateCancelledStatus upgrades a database the schema before
// migration 0012 wrote, with rows in every table that refers to runs: the
// runs keep every row, column and index (SQLite rebuilds the table), the
// rows that refer to them are all there, a run can then end cancelled,
// and foreign keys hold again.
func TestMigrateCancelledStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		path func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return tempDB(t) }},
		{"postgres", func(t *testing.T) string { return pgtest.URL(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			path := tc.path(t)
			pg := tc.name == "postgres"
			ms := migrations
			if pg {
				ms = pgMigrations
			}
			db := rawDB(t, path, pg)
			if _, err := db.ExecContext(ctx, createMigrationsTable); err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				if m.version >= 12 {
					break
				}
				if _, err := db.ExecContext(ctx, m.sql); err != nil {
					t.Fatalf("migration %s: %v", m.name, err)
				}
				if _, err := db.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (`+strconv.Itoa(m.version)+`, '`+m.name+`', 0)`); err != nil {
					t.Fatal(err)
				}
			}
			for _, q := range []string{
				`INSERT INTO runs (exec_id, tool, status, started_at, owner, tenant, goal, envelope) VALUES ('done', 'cli', 'success', 2, 'alice', 'acme', 'a goal', '{}')`,
				`INSERT INTO runs (exec_id, tool, status, started_at, parent_exec_id) VALUES ('child', 'agent', 'failed', 3, 'done')`,
				`INSERT INTO runs (exec_id, tool, status, started_at, lease_until) VALUES ('live', 'cli', 'running', 4, 99)`,
				`INSERT INTO runs (exec_id, tool, status, started_at) VALUES ('cut', 'cli', 'interrupted', 5)`,
				`INSERT INTO runs (exec_id, tool, status, started_at, owner, tenant, goal) VALUES ('gone', 'cli', 'success', 6, 'o', 't', 'deleted later')`,
				`DELETE FROM runs WHERE exec_id = 'gone'`, // the newest: the counter stands past the rows
				`INSERT INTO steps (exec_id, step_id, status, kind, step_exec_id) VALUES ('done', 's1', 'success', 'tool', 'e1')`,
				`INSERT INTO steps (exec_id, step_id, status) VALUES ('live', 's1', 'running')`,
				`INSERT INTO resumable (exec_id, request) VALUES ('cut', '{}')`,
				`INSERT INTO pauses (exec_id, seq, event, at) VALUES ('cut', 1, 'paused', 7)`,
			} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			before := schemaOf(t, db, pg)
			seqs := seqOf(t, db)
			db.Close()

			s := openTest(t, path, Options{})
			if after := schemaOf(t, s.reader, pg); !slices.Equal(after, before) {
				t.Errorf("the columns and indexes of runs changed:\nbefore %q\nafter  %q", before, after)
			}
			if after := seqOf(t, s.reader); !slices.Equal(after, seqs) {
				t.Errorf("the runs and their order changed: before %v, after %v", seqs, after)
			}
			for table, want := range map[string]int{"steps": 2, "resumable": 1, "pauses": 1} {
				var n int
				if err := s.reader.QueryRowContext(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil || n != want {
					t.Errorf("%s has %d rows (%v), want %d", table, n, err, want)
				}
			}
			if r, _, err := s.Get(ctx, "done"); err != nil || r.Owner != "alice" || r.Tenant != "acme" || r.Goal != "a goal" {
				t.Errorf("run done after the upgrade: %+v, %v", r, err)
			}
			if err := s.StartRun(ctx, Run{ExecID: "new", Tool: "cli"}); err != nil {
				t.Fatal(err)
			}
			if got := seqOf(t, s.reader); len(got) != len(seqs)+1 || got[len(got)-1] != seqs[len(seqs)-1]+2 {
				t.Errorf("a new run's seq is not past the deleted newest run's: %v after %v", got, seqs)
			}
			if err := s.FinishRun(ctx, "new", StatusCancelled, []byte(`{"artifact": {"status": "cancelled"}}`), time.Time{}, 1); err != nil {
				t.Fatalf("finishing a run cancelled: %v", err)
			}
			if r, _, err := s.Get(ctx, "new"); err != nil || r.Status != StatusCancelled {
				t.Errorf("the cancelled run: %+v, %v", r, err)
			}
			if _, err := s.writer.ExecContext(ctx, `INSERT INTO steps (exec_id, step_id, status) VALUES ('nobody', 's1', 'running')`); err == nil {
				t.Error("a step of a run that does not exist was accepted: foreign keys are off after the migration")
			}
			if _, err := s.writer.ExecContext(ctx, `UPDATE runs SET status = 'bogus' WHERE exec_id = 'done'`); err == nil {
				t.Error("the status constraint no longer holds")
			}
		})
	}
}

// rawDB opens the database at path without the store.
func rawDB(t *testing.T, path string, pg bool) *sql.DB {
	t.Helper()
	if pg {
		db, err := sql.Open("pgx", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	db := rawOpen(t, path)
	if _, err := db.ExecContext(t.Context(), `PRAGMA foreign_keys = ON`); err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	return db
}

// schemaOf lists the columns of runs (name and type, in order) and its
// indexes (name and definition).
func schemaOf(t *testing.T, db *sql.DB, pg bool) []string {
	t.Helper()
	cols := `SELECT name || ' ' || type FROM pragma_table_info('runs') ORDER BY cid`
	idx := `SELECT name || ': ' || sql FROM sqlite_schema WHERE tbl_name = 'runs' AND type = 'index' AND sql IS NOT NULL ORDER BY name`
	if pg {
		cols = `SELECT column_name || ' ' || data_type FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'runs' ORDER BY ordinal_position`
		idx = `SELECT indexname || ': ' || indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'runs' ORDER BY indexname`
	}
	var out []string
	for _, q := range []string{cols, idx} {
		rows, err := db.QueryContext(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if len(out) < 20 {
		t.Fatalf("runs has too little schema to compare: %q", out)
	}
	return out
}

// seqOf lists the seq of every run, in order.
func seqOf(t *testing.T, db *sql.DB) []int64 {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT seq FROM runs ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var n int64
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}
