package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql migrations/postgres/*.sql
var migrationFiles embed.FS

// A migration moves the schema from version-1 to version.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations are the embedded migrations in order. Files are named
// NNNN_description.sql with increasing numbers; a released file is never
// edited, only followed by a new one. Numbers are handed out ahead of time
// to changes made side by side, so they may have gaps, and a database may
// meet a number below its newest one later: every migration it has not
// recorded is applied, in order.
var migrations = loadMigrations(migrationFiles, "migrations")

// pgMigrations are their PostgreSQL twins, in migrations/postgres: the
// same numbers and names, the same schema in PostgreSQL's words.
var pgMigrations = loadMigrations(migrationFiles, "migrations/postgres")

func loadMigrations(fsys fs.FS, dir string) []migration {
	names, err := fs.Glob(fsys, dir+"/*.sql")
	if err != nil {
		panic("store: listing migrations: " + err.Error())
	}
	sort.Strings(names)
	var ms []migration
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v < 1 || len(num) != 4 {
			panic(fmt.Sprintf("store: migration %s: want a name starting NNNN_ (a positive four-digit number)", name))
		}
		if len(ms) > 0 && ms[len(ms)-1].version == v {
			panic(fmt.Sprintf("store: migrations %s.sql and %s both have the number %04d", ms[len(ms)-1].name, name, v))
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			panic("store: reading migration: " + err.Error())
		}
		ms = append(ms, migration{version: v, name: strings.TrimSuffix(base, ".sql"), sql: string(body)})
	}
	return ms
}

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	name       TEXT    NOT NULL,
	applied_at BIGINT  NOT NULL -- INTEGER on SQLite; PostgreSQL needs 64 bits
)`

// schemaVersion returns the last migration applied, 0 for an empty database.
func schemaVersion(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, pg bool) (int, error) {
	var exists int
	query := `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'`
	if pg {
		query = `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'schema_migrations'`
	}
	if err := q.QueryRowContext(ctx, query).Scan(&exists); err != nil {
		return 0, err
	}
	if exists == 0 {
		return 0, nil
	}
	var v int
	err := q.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

// unknownVersion returns a migration the database recorded that ms does not
// have, or 0: the database was migrated by a newer build.
func unknownVersion(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, ms []migration) (int, error) {
	rows, err := q.QueryContext(ctx, `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	known := make(map[int]bool, len(ms))
	for _, m := range ms {
		known[m.version] = true
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return 0, err
		}
		if !known[v] {
			return v, nil
		}
	}
	return 0, rows.Err()
}

// migrate applies the migrations the database has not recorded, each in
// its own transaction and in order, and refuses a database that recorded a
// migration it does not know (one made by a newer build). Each transaction
// takes the write lock first, so processes opening the same database at
// once apply every migration exactly once.
func (s *Store) migrate(ctx context.Context, ms []migration) error {
	if err := s.createMigrationsTable(ctx); err != nil {
		return fmt.Errorf("creating schema_migrations: %w", err)
	}
	latest := 0
	if len(ms) > 0 {
		latest = ms[len(ms)-1].version
	}
	// Migrating a store that holds records is news; making a new or an
	// in-memory one is not.
	level := slog.LevelInfo
	var recorded int
	if err := s.writer.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&recorded); err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	if recorded == 0 || s.inMemory() {
		level = slog.LevelDebug
	}
	for _, m := range ms {
		applied, err := s.applyMigration(ctx, m, ms, latest)
		if err != nil {
			return err
		}
		if applied {
			s.log.Log(ctx, level, "applied execution store migration", "version", m.version, "name", m.name)
		}
	}
	// A database that applied nothing above may still be too new.
	if v, err := unknownVersion(ctx, s.writer, ms); err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	} else if v != 0 {
		return fmt.Errorf("%w: the database has migration %d, this build knows up to %d", ErrSchemaTooNew, v, latest)
	}
	return nil
}

func (s *Store) applyMigration(ctx context.Context, m migration, ms []migration, latest int) (applied bool, err error) {
	// A table rebuild runs on one connection with foreign keys off, as
	// SQLite's procedure for schema changes ALTER TABLE cannot make says:
	// dropping the old table must not cascade to the rows that refer to it.
	conn, err := s.writer.Conn(ctx)
	if err != nil {
		return false, fmt.Errorf("migration %s: %w", m.name, err)
	}
	defer conn.Close()
	rebuild, rebuilds := sqliteRebuilds[m.version]
	if rebuilds && !s.pg {
		if _, err := conn.ExecContext(ctx, `PRAGMA foreign_keys = OFF`); err != nil {
			return false, fmt.Errorf("migration %s: %w", m.name, err)
		}
		defer func() {
			if _, ferr := conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA foreign_keys = ON`); ferr != nil && err == nil {
				err = fmt.Errorf("migration %s: turning foreign keys back on: %w", m.name, ferr)
			}
		}()
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("migration %s: %w", m.name, err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	if err := s.lockSchema(ctx, tx); err != nil {
		return false, fmt.Errorf("migration %s: %w", m.name, err)
	}
	if v, err := unknownVersion(ctx, tx, ms); err != nil {
		return false, fmt.Errorf("migration %s: reading schema version: %w", m.name, err)
	} else if v != 0 {
		return false, fmt.Errorf("%w: the database has migration %d, this build knows up to %d", ErrSchemaTooNew, v, latest)
	}
	var done int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.version).Scan(&done); err != nil {
		return false, fmt.Errorf("migration %s: reading schema version: %w", m.name, err)
	}
	if done > 0 {
		return false, tx.Rollback()
	}
	if rebuilds && !s.pg {
		if err := rebuild.apply(ctx, tx); err != nil {
			return false, fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return false, fmt.Errorf("migration %s: %w", m.name, err)
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.version, m.name, s.now().UnixNano()); err != nil {
		return false, fmt.Errorf("migration %s: recording it: %w", m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migration %s: %w", m.name, err)
	}
	return true, nil
}

// createMigrationsTable creates schema_migrations if it is missing. On
// PostgreSQL, replicas starting together take the schema lock first:
// CREATE TABLE IF NOT EXISTS is not safe against a concurrent one there.
func (s *Store) createMigrationsTable(ctx context.Context) error {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := s.lockSchema(ctx, tx); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, createMigrationsTable); err != nil {
		return err
	}
	return tx.Commit()
}

// schemaLockKey is the PostgreSQL advisory lock that serialises migrations.
const schemaLockKey = 0x6f72636865737472 // "orchestr"

// lockSchema makes tx wait for any other migration of the same database.
// SQLite needs nothing: the writer's transactions take the write lock
// when they begin.
func (s *Store) lockSchema(ctx context.Context, tx *sql.Tx) error {
	if !s.pg {
		return nil
	}
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, int64(schemaLockKey))
	return err
}

// sqliteRebuilds are the SQLite migrations that change what ALTER TABLE
// cannot (a CHECK constraint), by version: the table is rebuilt before the
// migration's SQL runs. The rebuild starts from the table as the database
// has it, so that the columns and indexes other migrations added are kept.
var sqliteRebuilds = map[int]tableRebuild{
	12: {
		table: "runs",
		from:  `CHECK (status IN ('running', 'success', 'failed', 'partial', 'interrupted'))`,
		to:    `CHECK (status IN ('running', 'success', 'failed', 'partial', 'interrupted', 'cancelled'))`,
	},
}

// tableRebuild rewrites part of a SQLite table's definition: from, which
// the definition must hold once, becomes to.
type tableRebuild struct {
	table    string
	from, to string
}

// apply rebuilds the table in tx (foreign keys off), following SQLite's
// procedure for other kinds of table schema changes: a new table made
// from the rewritten definition takes every row, the old one is dropped,
// the new one takes its name, its indexes and triggers are made again, and
// its AUTOINCREMENT counter goes on where the old one stood. The foreign
// keys are checked before the transaction commits.
func (r tableRebuild) apply(ctx context.Context, tx *sql.Tx) error {
	var def string
	if err := tx.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?`, r.table).Scan(&def); err != nil {
		return fmt.Errorf("reading the definition of table %s: %w", r.table, err)
	}
	if n := strings.Count(def, r.from); n != 1 {
		return fmt.Errorf("rebuilding table %s: its definition holds %q %d times, want once:\n%s", r.table, r.from, n, def)
	}
	open := strings.Index(def, "(")
	if open < 0 {
		return fmt.Errorf("rebuilding table %s: its definition has no column list:\n%s", r.table, def)
	}
	tmp := r.table + "_rebuilt"
	def = `CREATE TABLE "` + tmp + `" ` + strings.Replace(def[open:], r.from, r.to, 1)

	var extras []string // the table's indexes and triggers; automatic indexes have no SQL
	rows, err := tx.QueryContext(ctx, `SELECT sql FROM sqlite_schema WHERE tbl_name = ? AND type IN ('index', 'trigger') AND sql IS NOT NULL ORDER BY type, name`, r.table)
	if err != nil {
		return fmt.Errorf("reading the indexes of table %s: %w", r.table, err)
	}
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			rows.Close()
			return fmt.Errorf("reading the indexes of table %s: %w", r.table, err)
		}
		extras = append(extras, q)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("reading the indexes of table %s: %w", r.table, err)
	}
	var seq sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT seq FROM sqlite_sequence WHERE name = ?`, r.table).Scan(&seq); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("reading the counter of table %s: %w", r.table, err)
	}

	steps := []string{
		def,
		`INSERT INTO "` + tmp + `" SELECT * FROM "` + r.table + `"`,
		`DROP TABLE "` + r.table + `"`,
		`ALTER TABLE "` + tmp + `" RENAME TO "` + r.table + `"`,
	}
	for _, q := range append(steps, extras...) {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("rebuilding table %s: %s: %w", r.table, firstLine(q), err)
		}
	}
	if seq.Valid {
		// The copy counted only to the newest row left; the old counter
		// may stand past rows deleted since.
		if _, err := tx.ExecContext(ctx, `DELETE FROM sqlite_sequence WHERE name = ?`, r.table); err != nil {
			return fmt.Errorf("rebuilding table %s: restoring its counter: %w", r.table, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)`, r.table, seq.Int64); err != nil {
			return fmt.Errorf("rebuilding table %s: restoring its counter: %w", r.table, err)
		}
	}
	var bad int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM pragma_foreign_key_check`).Scan(&bad); err != nil {
		return fmt.Errorf("rebuilding table %s: checking foreign keys: %w", r.table, err)
	} else if bad > 0 {
		return fmt.Errorf("rebuilding table %s: %d rows refer to rows that are missing", r.table, bad)
	}
	return nil
}

// firstLine is q up to its first line break, for an error.
func firstLine(q string) string {
	line, _, _ := strings.Cut(q, "\n")
	return line
}
