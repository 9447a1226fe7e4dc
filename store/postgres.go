package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// PostgreSQL. A store whose path is a postgres:// (or postgresql://) URL
// keeps its records in that database through pgx, so that several replicas
// share them. The SQL is the SQLite store's: a connection wrapper turns its
// ? placeholders into PostgreSQL's $1, $2..., and the few statements that
// differ have a twin here. The schema comes from migrations/postgres, the
// twins of migrations/*.sql.
//
// Crash recovery cannot use lock files on a shared database. Each replica
// instead holds a lease on the runs it executes: lease_until is set when a
// run starts and pushed forward every Lease/3 while the store is open. A
// running run whose lease lapsed belongs to a replica that stopped renewing
// it — killed, or cut off from the database — and any other replica marks
// it interrupted, never sooner. The replicas' clocks must agree to well
// within the lease.

// IsPostgres reports whether path names a PostgreSQL database rather than a
// SQLite file.
func IsPostgres(path string) bool {
	return strings.HasPrefix(path, "postgres://") || strings.HasPrefix(path, "postgresql://")
}

// DefaultLease is how long a replica's lease on its runs lasts unless
// Options.Lease says otherwise.
const DefaultLease = 30 * time.Second

// pgMaxConns caps the connections of a store's reader pool on PostgreSQL.
const pgMaxConns = 8

func (s *Store) openPostgres(ctx context.Context) error {
	cfg, err := pgx.ParseConfig(s.path)
	if err != nil {
		return fmt.Errorf("parsing the database URL: %w", redactURLError(err))
	}
	connector := rebindConnector{stdlib.GetConnector(*cfg)}
	// Writes go through one connection, as on SQLite: the writer goroutine
	// batches them. Reads, the lease and recovery have their own pool.
	s.writer = sql.OpenDB(connector)
	s.writer.SetMaxOpenConns(1)
	s.writer.SetMaxIdleConns(1)
	s.reader = sql.OpenDB(connector)
	s.reader.SetMaxOpenConns(pgMaxConns)
	s.reader.SetMaxIdleConns(pgMaxConns)
	if err := s.writer.PingContext(ctx); err != nil {
		return redactURLError(err)
	}
	if err := s.migrate(ctx, pgMigrations); err != nil {
		return err
	}
	n, err := s.interruptLapsed(ctx)
	if err != nil {
		return fmt.Errorf("recovering interrupted runs: %w", err)
	}
	s.recovered = n
	if n > 0 {
		s.log.Info("marked runs whose lease lapsed interrupted", "count", n)
	}
	if _, err := s.Prune(ctx); err != nil {
		return err
	}
	s.stmts, err = prepareStatements(ctx, s.writer, s.instance)
	return err
}

// redactURLError keeps a connection error from repeating the URL's password.
func redactURLError(err error) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		return errors.New("invalid PostgreSQL URL")
	}
	return err
}

// startLeases renews this store's leases and interrupts lapsed ones every
// Lease/3 until the store closes.
func (s *Store) startLeases() {
	s.leaseStop = make(chan struct{})
	s.leaseDone = make(chan struct{})
	go func() {
		defer close(s.leaseDone)
		t := time.NewTicker(s.lease / 3)
		defer t.Stop()
		for {
			select {
			case <-s.leaseStop:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), s.lease/3)
			if err := s.renewLeases(ctx); err != nil {
				s.log.Warn("renewing the leases of running runs", "err", err)
			}
			if n, err := s.interruptLapsed(ctx); err != nil {
				s.log.Warn("interrupting runs whose lease lapsed", "err", err)
			} else if n > 0 {
				s.log.Warn("marked runs whose lease lapsed interrupted", "count", n)
			}
			s.runSweep(ctx)
			cancel()
		}
	}()
}

func (s *Store) stopLeases() {
	if s.leaseStop != nil {
		close(s.leaseStop)
		<-s.leaseDone
	}
}

// leaseUntil is the end of a lease taken or renewed now.
func (s *Store) leaseUntil() sql.NullInt64 {
	if !s.pg {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: s.now().Add(s.lease).UnixNano(), Valid: true}
}

// RenewLeases pushes forward the lease of every run this store is
// running. An open store on PostgreSQL does it by itself every Lease/3.
func (s *Store) renewLeases(ctx context.Context) error {
	_, err := s.reader.ExecContext(ctx, `UPDATE runs SET lease_until = ? WHERE status = 'running' AND instance = ?`,
		s.leaseUntil(), s.instance)
	return err
}

// interruptLapsed marks interrupted the running runs of other instances
// whose lease has lapsed, with their running steps, and returns how many.
// It takes the runs' rows first, as the fenced writes do (ErrFenced), so
// that a late write and the takeover wait for each other rather than
// deadlock.
func (s *Store) interruptLapsed(ctx context.Context) (int, error) {
	var n int
	err := s.reader.QueryRowContext(ctx, `WITH lapsed AS (
			UPDATE runs SET status = 'interrupted', error = ?
			WHERE status = 'running' AND instance != ? AND lease_until < ? AND `+notPaused+`
			RETURNING exec_id),
		steps_interrupted AS (
			UPDATE steps SET status = 'interrupted'
			WHERE status = 'running' AND exec_id IN (SELECT exec_id FROM lapsed))
		SELECT count(*) FROM lapsed`, leaseLapsedError, s.instance, s.now().UnixNano()).Scan(&n)
	return n, err
}

// leaseLapsedError is the Error of a run whose replica stopped renewing its lease.
const leaseLapsedError = "the replica running it stopped renewing its lease before the run finished"

// rebindConnector opens pgx connections that accept ? placeholders.
type rebindConnector struct{ driver.Connector }

func (c rebindConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &rebindConn{conn.(*stdlib.Conn)}, nil
}

// rebindConn is a pgx connection whose queries may use ? placeholders.
type rebindConn struct{ *stdlib.Conn }

func (c *rebindConn) Prepare(query string) (driver.Stmt, error) {
	return c.Conn.Prepare(rebind(query))
}

func (c *rebindConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.PrepareContext(ctx, rebind(query))
}

func (c *rebindConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.ExecContext(ctx, rebind(query), args)
}

func (c *rebindConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.QueryContext(ctx, rebind(query), args)
}

// rebind numbers the ? placeholders of query as $1, $2..., leaving those
// inside quoted strings and identifiers alone.
func rebind(query string) string {
	if !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	var quote byte
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// PostgreSQL's error codes for the constraints the writes rely on.
const (
	pgUniqueViolation     = "23505"
	pgForeignKeyViolation = "23503"
)

func isPGConstraint(err error, code string) bool {
	var e *pgconn.PgError
	return errors.As(err, &e) && e.Code == code
}
