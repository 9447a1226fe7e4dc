package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Status is the state of a run.
type Status string

// The statuses of a run. A run is [StatusRunning] from [Store.StartRun] until
// [Store.FinishRun]; a run whose process ended before it finished is
// [StatusInterrupted]; one its caller stopped is [StatusCancelled].
const (
	StatusRunning     Status = "running"
	StatusSuccess     Status = "success"
	StatusFailed      Status = "failed"
	StatusPartial     Status = "partial"
	StatusInterrupted Status = "interrupted"
	StatusCancelled   Status = "cancelled"
)

// valid reports whether s is one of the known statuses.
func (s Status) valid() bool {
	switch s {
	case StatusRunning, StatusSuccess, StatusFailed, StatusPartial, StatusInterrupted, StatusCancelled:
		return true
	}
	return false
}

// Memory is the path that keeps the database in memory: nothing is written to
// disk and the records end with the [Store]. ":memory:" is accepted too.
const Memory = "memory"

// Errors returned by the store, wrapped with the id or value concerned; test
// for them with [errors.Is].
var (
	// ErrNotFound means no run has the given exec id.
	ErrNotFound = errors.New("execution record not found")
	// ErrExists means StartRun was given an exec id that is already recorded.
	ErrExists = errors.New("execution record already exists")
	// ErrInvalidCursor means a List cursor was not one List returned.
	ErrInvalidCursor = errors.New("invalid execution list cursor")
	// ErrSchemaTooNew means the database was migrated by a newer orchestra
	// than this one; use that version or another database.
	ErrSchemaTooNew = errors.New("execution store schema is newer than this orchestra")
	// ErrClosed means a write came after Close.
	ErrClosed = errors.New("execution store is closed")
)

// Run is the record of one orchestration. Times read back from the store are
// in UTC, to the nanosecond.
type Run struct {
	// ExecID identifies the run; it is unique in the store.
	ExecID string
	// RequestID is the id of the request that started the run, if any.
	RequestID string
	// Owner identifies who started the run: the caller's credential (an
	// HTTP client's bearer token, as a hash), or "" for the machine's own
	// callers (the CLI, a stdio client). A reader limited to an owner (see
	// Scope) sees only that owner's runs.
	Owner string
	// UserID is the authenticated subject that started the run: a named
	// token's name, a JWT's sub, or a short hash of an unnamed token.
	UserID string
	// Tenant is the tenant of the caller that started the run, "" without
	// tenants. A reader limited to a tenant (see TenantScope) sees only its
	// runs.
	Tenant string
	// Tool says what started the run: "agent_orchestrate" or "cli".
	Tool string
	// Status is the run's state.
	Status Status
	// StartedAt is when the run started; StartRun uses Options.Now when it is zero.
	StartedAt time.Time
	// FinishedAt is when the run finished; zero while it runs and for
	// interrupted runs.
	FinishedAt time.Time
	// DurationMS is FinishedAt - StartedAt in milliseconds.
	DurationMS int64
	// Plan is the normalized plan that ran, as JSON. List leaves it nil.
	Plan json.RawMessage
	// Envelope is the result envelope, as JSON. List leaves it nil.
	Envelope json.RawMessage
	// StepCount is the number of leaf steps in the plan, as given to StartRun.
	StepCount int
	// Error summarizes why the run did not succeed; see [Store.FinishRun].
	Error string
	// ParentExecID is the run that started this one (an agent's run names
	// the run of the plan that called the agent); "" for a caller's run.
	ParentExecID string
	// Resumable reports that the run can go on: it is paused (Status is
	// StatusPaused), or it was interrupted, failed or cancelled and kept its request.
	Resumable bool
	// Goal is the prompt of a run of the prompt path; "" for a plan.
	Goal string
	// FirstStep describes the plan's first step, "id (tool)", for a run
	// started with a plan.
	FirstStep string
	// TokensIn and TokensOut are the model tokens the run's envelope
	// counts: its planner's, its agents', or an agent run's model turns.
	// FinishRun sets them; they are 0 for a run that used no model.
	TokensIn, TokensOut int64
}

// StepRecord is the record of one step of a run.
type StepRecord struct {
	// ExecID is the run the step belongs to.
	ExecID string
	// StepID is the step's id, unique within the run.
	StepID string
	// StepExecID names this execution of the step (the step's exec_id in
	// the envelope); empty for a step that never started.
	StepExecID string
	// Index is the step's position in the plan.
	Index int
	// Path locates a step nested in parallel groups, e.g. "drafts/0".
	Path string
	// Kind is what the step is: "tool", "agent", "parallel", "for_each",
	// or "model" (a model turn of an agent's run); "" when not recorded.
	Kind string
	// Tool is the tool the step called; empty for a group.
	Tool string
	// Status is the step's status: running, success, failed, partial,
	// skipped, cancelled or interrupted.
	Status string
	// StartedAt is when the step started; zero if it never did.
	StartedAt time.Time
	// DurationMS is how long the step took, in milliseconds.
	DurationMS int64
	// Attempts counts the calls made, retries included.
	Attempts int
	// Arguments are the arguments the tool was called with, templates
	// resolved, as JSON.
	Arguments json.RawMessage
	// Output is the step's output, as JSON.
	Output json.RawMessage
	// Error is the step's error object, as JSON.
	Error json.RawMessage
}

// Retention says which finished runs Prune deletes. A zero field keeps
// everything on that account. Running runs are never pruned.
type Retention struct {
	// MaxAge deletes runs that started longer ago than this.
	MaxAge time.Duration
	// MaxRuns keeps only the newest MaxRuns runs.
	MaxRuns int
}

// Options configure a [Store]. The zero value is usable.
type Options struct {
	// Retention is applied by Prune, when the store opens and, from time to
	// time, after FinishRun.
	Retention Retention
	// Logger receives the store's logs; nil discards them.
	Logger *slog.Logger
	// Now returns the current time; nil means time.Now. Tests inject it.
	Now func() time.Time
	// CommitDelay is how long queued writes may wait for more to join them
	// in one transaction: 0 means DefaultCommitDelay, a negative value no
	// wait. A read, a synchronous write or Close never waits for it; a
	// process killed within it loses those writes.
	CommitDelay time.Duration
	// Lease is how long a replica's lease on the runs it executes lasts on
	// PostgreSQL (see [IsPostgres]): a run whose lease lapsed is marked
	// interrupted by another replica. Zero means [DefaultLease]. SQLite
	// stores ignore it: they see a dead process by its lock file.
	Lease time.Duration
}

// DefaultCommitDelay lets the writes of a short run (its start, its steps
// as they start and end, its finish) share one transaction.
const DefaultCommitDelay = 2 * time.Millisecond

// Stats describes a store.
type Stats struct {
	// Path is the database file, "memory", or a PostgreSQL URL without its password.
	Path string
	// SchemaVersion is the number of the last migration applied.
	SchemaVersion int
	// Runs counts the runs by status.
	Runs map[Status]int
	// Recovered is how many runs left running by ended processes were marked
	// interrupted when the store opened.
	Recovered int
	// Writes counts the writes the writer applied since the store opened
	// (StartRun, RecordStep, FinishRun and their Queue forms), failed ones
	// included.
	Writes int64
	// Fenced counts the writes refused because another replica took their
	// run over after this one's lease lapsed ([ErrFenced]).
	Fenced int64
	// Transactions counts the write transactions the writer committed for
	// them: under load, many writes share one.
	Transactions int64
}

// Store keeps execution records in a SQLite database. Its methods are safe
// for concurrent use, and several processes may share one database file.
//
// One writer goroutine per Store applies the writes, several at a time in
// one transaction; reads wait for the writes queued before them. See
// [Store.StartRun] and [Store.QueueStartRun].
type Store struct {
	path     string
	writer   *sql.DB // one connection: SQLite has one writer at a time
	reader   *sql.DB // concurrent readers under WAL; the writer itself in memory mode
	log      *slog.Logger
	now      func() time.Time
	keep     Retention
	instance string        // this store's id, stored on the runs it starts
	pg       bool          // the database is PostgreSQL
	lease    time.Duration // Options.Lease, on PostgreSQL

	leaseStop, leaseDone chan struct{} // the lease renewer's; nil on SQLite
	lock                 *instanceLock // held while open, so other processes know the instance lives

	recovered int

	// insightCaps are MaxInsightsPerOwner and MaxInsights; tests lower them.
	insightCaps struct{ perOwner, total int }

	pruneMu       sync.Mutex
	lastPrune     time.Time
	finishedSince int
	pruneEvery    int           // FinishRun calls between automatic prunes
	pruneInterval time.Duration // or this much time, whichever comes first

	q          *queue
	linger     time.Duration // Options.CommitDelay
	stmts      *statements   // the hot writes, used by the writer goroutine only
	writerDone chan struct{} // closed when the writer goroutine has ended; nil before it starts
	writes     atomic.Int64  // writes applied, for Stats
	commits    atomic.Int64  // transactions committed for them, for Stats
	fenced     atomic.Int64  // writes refused by fencing, for Stats
	running    executing     // the runs this process executes, on PostgreSQL

	closeOnce sync.Once
	closeErr  error
}

const (
	busyTimeout = 5 * time.Second
	maxReaders  = 4
)

// DefaultPath returns where the database lives unless configured otherwise:
// $XDG_STATE_HOME/orchestra/orchestra.db, or
// ~/.local/state/orchestra/orchestra.db when XDG_STATE_HOME is unset or not
// an absolute path.
func DefaultPath() (string, error) {
	if dir := os.Getenv("XDG_STATE_HOME"); dir != "" && filepath.IsAbs(dir) {
		return filepath.Join(dir, "orchestra", "orchestra.db"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("finding the default store path: %w", err)
	}
	return filepath.Join(home, ".local", "state", "orchestra", "orchestra.db"), nil
}

// Open opens the database at path, creating it and its parent directories
// (mode 0700) if needed, and migrates its schema. The path [Memory] (or
// ":memory:") keeps the records in memory only.
//
// Open marks as interrupted the runs left running by store instances that
// no longer exist — a process that crashed or was killed; [Store.Stats] tells
// how many. Runs of a store that is still open, in this process or another,
// are left alone; an in-memory store has nothing to recover. Open then
// applies the retention policy.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("opening execution store: empty path (use DefaultPath or \"memory\")")
	}
	s := &Store{
		path:          path,
		log:           opts.Logger,
		now:           opts.Now,
		keep:          opts.Retention,
		pruneEvery:    64,
		pruneInterval: time.Minute,
		q:             newQueue(queueSize),
		linger:        opts.CommitDelay,
	}
	if s.linger == 0 {
		s.linger = DefaultCommitDelay
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.pg = IsPostgres(path)
	s.lease = opts.Lease
	if s.lease <= 0 {
		s.lease = DefaultLease
	}
	if s.keep.MaxAge < 0 || s.keep.MaxRuns < 0 {
		return nil, fmt.Errorf("opening execution store: negative retention %+v", s.keep)
	}
	s.instance = newInstanceID()

	open := s.open
	if s.pg {
		open = s.openPostgres
	}
	if err := open(ctx); err != nil {
		s.closeDBs()
		if s.lock != nil {
			s.lock.release(true)
		}
		return nil, fmt.Errorf("opening execution store %s: %w", s.displayPath(), err)
	}
	s.startWriter()
	if s.pg {
		s.startLeases()
	}
	s.log.Debug("execution store open", "path", s.displayPath(), "instance", s.instance)
	return s, nil
}

func (s *Store) inMemory() bool { return s.path == Memory || s.path == ":memory:" }

// displayPath is the store's path without a database URL's password.
func (s *Store) displayPath() string {
	if !s.pg {
		return s.path
	}
	u, err := url.Parse(s.path)
	if err != nil {
		return "postgres://(invalid URL)"
	}
	return u.Redacted()
}

func (s *Store) open(ctx context.Context) error {
	if s.inMemory() {
		// A private in-memory database lives as long as its connection, so
		// reads and writes share one connection that is never let go.
		db, err := sql.Open("sqlite", ":memory:?_pragma=foreign_keys(1)")
		if err != nil {
			return err
		}
		db.SetMaxOpenConns(1)
		db.SetMaxIdleConns(1)
		db.SetConnMaxIdleTime(0)
		db.SetConnMaxLifetime(0)
		s.writer, s.reader = db, db
		if err := db.PingContext(ctx); err != nil {
			return err
		}
		s.lastPrune = s.now() // a new database: nothing to prune yet
		if err := s.migrate(ctx, migrations); err != nil {
			return err
		}
		s.stmts, err = prepareStatements(ctx, db, "")
		return err
	}

	abs, err := filepath.Abs(s.path)
	if err != nil {
		return err
	}
	s.path = abs
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return err
	}
	// Create the file ourselves so records, which may hold tool outputs, are
	// readable by the owner only; SQLite gives its -wal and -shm files the
	// same mode.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}

	// The writer takes the write lock when a transaction begins, so two
	// processes never deadlock upgrading read transactions; busy_timeout makes
	// one wait for the other. synchronous=NORMAL in WAL mode loses nothing
	// when the process dies, only possibly the last commits on power loss.
	base := sqliteURI(abs)
	writer, err := sql.Open("sqlite", base+
		"?_txlock=immediate"+
		"&_pragma=busy_timeout("+fmt.Sprint(busyTimeout.Milliseconds())+")"+
		"&_pragma=journal_mode(WAL)"+
		"&_pragma=synchronous(NORMAL)"+
		"&_pragma=foreign_keys(1)")
	if err != nil {
		return err
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxIdleTime(0)
	writer.SetConnMaxLifetime(0)
	s.writer = writer
	if err := writer.PingContext(ctx); err != nil {
		return err
	}

	reader, err := sql.Open("sqlite", base+
		"?_pragma=busy_timeout("+fmt.Sprint(busyTimeout.Milliseconds())+")"+
		"&_pragma=foreign_keys(1)"+
		"&_pragma=query_only(1)")
	if err != nil {
		return err
	}
	reader.SetMaxOpenConns(maxReaders)
	reader.SetMaxIdleConns(maxReaders)
	s.reader = reader

	if err := s.migrate(ctx, migrations); err != nil {
		return err
	}
	lock, err := acquireInstanceLock(instanceDir(abs), s.instance)
	if err != nil {
		return fmt.Errorf("taking the instance lock: %w", err)
	}
	s.lock = lock
	n, err := s.recoverDead(ctx)
	if err != nil {
		return fmt.Errorf("recovering interrupted runs: %w", err)
	}
	s.recovered = n
	if n > 0 {
		s.log.Info("marked runs of ended processes interrupted", "count", n)
	}
	if _, err := s.Prune(ctx); err != nil {
		return err
	}
	s.stmts, err = prepareStatements(ctx, writer, "")
	return err
}

// sqliteURI turns an absolute file path into a SQLite URI filename.
func sqliteURI(abs string) string {
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows volume: file:/C:/...
	}
	p = strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(p)
	return "file:" + p
}

func newInstanceID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("store: reading random bytes: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// Stats reports the store's path, schema version, run counts and writes,
// once the writes queued before it are applied.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	st := Stats{Path: s.displayPath(), Runs: map[Status]int{}, Recovered: s.recovered}
	if s.inMemory() {
		st.Path = Memory
	}
	if err := s.Flush(ctx); err != nil {
		return st, fmt.Errorf("reading execution store stats: %w", err)
	}
	st.Writes, st.Transactions, st.Fenced = s.writes.Load(), s.commits.Load(), s.fenced.Load()
	v, err := schemaVersion(ctx, s.reader, s.pg)
	if err != nil {
		return st, fmt.Errorf("reading execution store stats: %w", err)
	}
	st.SchemaVersion = v
	rows, err := s.reader.QueryContext(ctx, `SELECT status, count(*) FROM runs GROUP BY status`)
	if err != nil {
		return st, fmt.Errorf("reading execution store stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var status string
		var n int
		if err := rows.Scan(&status, &n); err != nil {
			return st, fmt.Errorf("reading execution store stats: %w", err)
		}
		st.Runs[Status(status)] = n
	}
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("reading execution store stats: %w", err)
	}
	return st, nil
}

// Close applies the writes queued before it and refuses later ones
// ([ErrClosed]), marks the runs this store started and never finished as
// interrupted, then closes the database. Calling Close again returns the
// first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.q.close()
		if s.writerDone != nil {
			<-s.writerDone
		}
		s.stopLeases()
		ctx, cancel := context.WithTimeout(context.Background(), busyTimeout)
		defer cancel()
		var errs []error
		if n, err := s.interruptInstance(ctx, s.instance); err != nil {
			errs = append(errs, fmt.Errorf("interrupting unfinished runs: %w", err))
		} else if n > 0 {
			s.log.Warn("store closed with runs unfinished; marked interrupted", "count", n)
		}
		errs = append(errs, s.closeDBs())
		if s.lock != nil {
			errs = append(errs, s.lock.release(true))
		}
		if err := errors.Join(errs...); err != nil {
			s.closeErr = fmt.Errorf("closing execution store: %w", err)
		}
	})
	return s.closeErr
}

func (s *Store) closeDBs() error {
	var errs []error
	if s.stmts != nil {
		errs = append(errs, s.stmts.close())
	}
	if s.reader != nil && s.reader != s.writer {
		errs = append(errs, s.reader.Close())
	}
	if s.writer != nil {
		errs = append(errs, s.writer.Close())
	}
	return errors.Join(errs...)
}
