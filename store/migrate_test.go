package store

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
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
