package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"modernc.org/sqlite"
)

// Scope says whose runs a read sees. The zero Scope sees every run, as the
// machine's own callers do (the CLI, a stdio client); OwnerScope sees one
// owner's runs only, TenantScope one tenant's, and OwnerScope(o).InTenant(t)
// the runs of owner o in tenant t.
type Scope struct {
	owner    string
	limited  bool
	tenant   string
	byTenant bool
}

// OwnerScope returns the scope of owner's runs.
func OwnerScope(owner string) Scope { return Scope{owner: owner, limited: true} }

// TenantScope returns the scope of tenant's runs, whoever started them.
func TenantScope(tenant string) Scope { return Scope{tenant: tenant, byTenant: true} }

// InTenant narrows sc to the runs of tenant.
func (sc Scope) InTenant(tenant string) Scope {
	sc.tenant, sc.byTenant = tenant, true
	return sc
}

// Sees reports whether the scope sees a run of owner, whatever its tenant;
// SeesRun checks both.
func (sc Scope) Sees(owner string) bool { return !sc.limited || sc.owner == owner }

// SeesRun reports whether the scope sees r.
func (sc Scope) SeesRun(r *Run) bool {
	return sc.Sees(r.Owner) && (!sc.byTenant || sc.tenant == r.Tenant)
}

// where returns the SQL conditions of the scope, with their arguments.
func (sc Scope) where() ([]string, []any) {
	var where []string
	var args []any
	if sc.limited {
		where = append(where, "owner = ?")
		args = append(args, sc.owner)
	}
	if sc.byTenant {
		where = append(where, "tenant = ?")
		args = append(args, sc.tenant)
	}
	return where, args
}

// Get returns a run with its envelope and plan, and its steps ordered by
// Index, then Path, once the writes queued before it are applied. An
// unknown id is [ErrNotFound]. Get sees every run; see GetIn.
func (s *Store) Get(ctx context.Context, execID string) (*Run, []StepRecord, error) {
	return s.GetIn(ctx, Scope{}, execID)
}

// GetIn is Get within scope: a run the scope does not see is
// [ErrNotFound], as if it did not exist.
func (s *Store) GetIn(ctx context.Context, scope Scope, execID string) (*Run, []StepRecord, error) {
	var r *Run
	var steps []StepRecord
	err := s.readRun(ctx, scope, execID, true, func(tx *sql.Tx, run *Run) (err error) {
		r = run
		steps, err = readSteps(ctx, tx, execID, "", true)
		return err
	})
	return r, steps, err
}

// readRun reads run execID within scope, with its plan and envelope when
// bodies is set, and calls f with it in the same read transaction, once
// the writes queued before it are applied: what f reads comes from the
// same snapshot. A run the scope does not see is [ErrNotFound].
func (s *Store) readRun(ctx context.Context, scope Scope, execID string, bodies bool, f func(*sql.Tx, *Run) error) error {
	if err := s.Flush(ctx); err != nil {
		return fmt.Errorf("reading run %s: %w", execID, err)
	}
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("reading run %s: %w", execID, err)
	}
	defer tx.Rollback()

	cols := `, NULL, NULL`
	if bodies {
		cols = `, plan, envelope`
	}
	row := tx.QueryRowContext(ctx, `SELECT `+runColumns+cols+` FROM runs WHERE exec_id = ?`, execID)
	var plan, envelope sql.NullString
	r, err := scanRun(row, &plan, &envelope)
	if errors.Is(err, sql.ErrNoRows) || err == nil && !scope.SeesRun(r) {
		return fmt.Errorf("reading run %s: %w", execID, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("reading run %s: %w", execID, err)
	}
	r.Plan = rawJSON(plan)
	r.Envelope = rawJSON(envelope)
	return f(tx, r)
}

// readSteps reads the steps of run execID ordered by Index, then Path —
// only step stepID when it is not "" — with their Arguments and Output
// when bodies is set.
func readSteps(ctx context.Context, tx *sql.Tx, execID, stepID string, bodies bool) ([]StepRecord, error) {
	cols := `step_id, idx, path, kind, tool, status, started_at, duration_ms, attempts, error, step_exec_id, `
	if bodies {
		cols += `arguments, output`
	} else {
		cols += `NULL, NULL`
	}
	q := `SELECT ` + cols + ` FROM steps WHERE exec_id = ?`
	args := []any{execID}
	if stepID != "" {
		q += ` AND step_id = ?`
		args = append(args, stepID)
	}
	rows, err := tx.QueryContext(ctx, q+` ORDER BY idx, path, step_id`, args...)
	if err != nil {
		return nil, fmt.Errorf("reading steps of run %s: %w", execID, err)
	}
	defer rows.Close()
	var steps []StepRecord
	for rows.Next() {
		st := StepRecord{ExecID: execID}
		var started sql.NullInt64
		var stepErr, arguments, output sql.NullString
		if err := rows.Scan(&st.StepID, &st.Index, &st.Path, &st.Kind, &st.Tool, &st.Status, &started,
			&st.DurationMS, &st.Attempts, &stepErr, &st.StepExecID, &arguments, &output); err != nil {
			return nil, fmt.Errorf("reading steps of run %s: %w", execID, err)
		}
		st.StartedAt = fromNull(started)
		st.Error, st.Arguments, st.Output = rawJSON(stepErr), rawJSON(arguments), rawJSON(output)
		steps = append(steps, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading steps of run %s: %w", execID, err)
	}
	return steps, nil
}

// ListOptions select a page of runs.
type ListOptions struct {
	// Limit is the page size: 50 when zero, at most 1000.
	Limit int
	// Cursor continues from the page that returned it; empty starts at the newest run.
	Cursor string
	// Status, when set, lists only runs with that status.
	Status Status
	// Scope limits the runs listed; the zero Scope lists every run.
	Scope Scope
	// Text, when set, lists only runs whose exec id, goal, first step,
	// tool, user or error contains it, ignoring ASCII case; at most
	// [MaxListText] bytes.
	Text string
	// Since and Until, when set, list only runs started at or after Since
	// and before Until.
	Since, Until time.Time
	// Roots lists only the runs callers started, leaving out those other
	// runs started (agents' runs).
	Roots bool
	// Parent, when set, lists only the runs that run Parent started.
	Parent string
}

const (
	defaultListLimit = 50
	maxListLimit     = 1000
)

// MaxListText caps the length of ListOptions.Text, in bytes.
const MaxListText = 256

// textColumns are the columns ListOptions.Text searches.
var textColumns = []string{"exec_id", "goal", "first_step", "tool", "user_id", "error"}

// likeEscaper escapes LIKE's wildcards, with \ as the escape character.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// filters returns the SQL conditions of the list options other than the
// scope, status and cursor, with their arguments.
func (opts ListOptions) filters() ([]string, []any, error) {
	var where []string
	var args []any
	if opts.Text != "" {
		if len(opts.Text) > MaxListText {
			return nil, nil, fmt.Errorf("the text filter is %d bytes long; at most %d are searched for", len(opts.Text), MaxListText)
		}
		pattern := "%" + likeEscaper.Replace(strings.ToLower(opts.Text)) + "%"
		var or []string
		for _, c := range textColumns {
			or = append(or, "lower("+c+`) LIKE ? ESCAPE '\'`)
			args = append(args, pattern)
		}
		where = append(where, "("+strings.Join(or, " OR ")+")")
	}
	if !opts.Since.IsZero() {
		where = append(where, "started_at >= ?")
		args = append(args, opts.Since.UnixNano())
	}
	if !opts.Until.IsZero() {
		where = append(where, "started_at < ?")
		args = append(args, opts.Until.UnixNano())
	}
	if opts.Roots {
		where = append(where, "parent_exec_id = ''")
	}
	if opts.Parent != "" {
		where = append(where, "parent_exec_id = ?")
		args = append(args, opts.Parent)
	}
	return where, args, nil
}

// List returns runs newest first (by StartedAt, ties broken by insertion
// order), without their Plan and Envelope bodies, and the cursor of the next
// page, empty after the last. Runs started after the first page do not shift
// later pages: each page continues exactly after the last run of the one
// before it. A cursor List did not return is [ErrInvalidCursor]. Like Get,
// List first waits for the writes queued before it.
func (s *Store) List(ctx context.Context, opts ListOptions) ([]Run, string, error) {
	limit := opts.Limit
	switch {
	case limit <= 0:
		limit = defaultListLimit
	case limit > maxListLimit:
		limit = maxListLimit
	}
	if opts.Status != "" && !opts.Status.valid() && opts.Status != StatusPaused {
		return nil, "", fmt.Errorf("listing runs: unknown status %q", opts.Status)
	}
	if err := s.Flush(ctx); err != nil {
		return nil, "", fmt.Errorf("listing runs: %w", err)
	}
	where, args := opts.Scope.where()
	fw, fa, err := opts.filters()
	if err != nil {
		return nil, "", fmt.Errorf("listing runs: %w", err)
	}
	where, args = append(where, fw...), append(args, fa...)
	switch opts.Status {
	case "":
	case StatusPaused: // a paused run is running, and paused
		where = append(where, "status = 'running' AND "+isPaused)
	case StatusRunning:
		where = append(where, "status = 'running' AND "+notPaused)
	default:
		where = append(where, "status = ?")
		args = append(args, string(opts.Status))
	}
	if opts.Cursor != "" {
		c, err := decodeCursor(opts.Cursor)
		if err != nil {
			return nil, "", fmt.Errorf("listing runs: %w", err)
		}
		where = append(where, "(started_at < ? OR (started_at = ? AND seq < ?))")
		args = append(args, c.startedAt, c.startedAt, c.seq)
	}
	q := `SELECT ` + runColumns + `, seq FROM runs`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY started_at DESC, seq DESC LIMIT ?"
	args = append(args, limit+1) // one more tells whether another page follows

	rows, err := s.reader.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("listing runs: %w", err)
	}
	defer rows.Close()
	var runs []Run
	var last cursor
	for rows.Next() {
		if len(runs) == limit {
			return runs, last.encode(), rows.Close()
		}
		var seq int64
		r, err := scanRun(rows, &seq)
		if err != nil {
			return nil, "", fmt.Errorf("listing runs: %w", err)
		}
		runs = append(runs, *r)
		last = cursor{startedAt: r.StartedAt.UnixNano(), seq: seq}
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("listing runs: %w", err)
	}
	return runs, "", nil
}

// cursor is the position after the last run of a page.
type cursor struct {
	startedAt int64
	seq       int64
}

const cursorPrefix = "r1."

func (c cursor) encode() string {
	raw := strconv.FormatInt(c.startedAt, 10) + "." + strconv.FormatInt(c.seq, 10)
	return cursorPrefix + base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func decodeCursor(s string) (cursor, error) {
	body, ok := strings.CutPrefix(s, cursorPrefix)
	if !ok {
		return cursor{}, fmt.Errorf("%w %q", ErrInvalidCursor, s)
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return cursor{}, fmt.Errorf("%w %q", ErrInvalidCursor, s)
	}
	a, b, ok := strings.Cut(string(raw), ".")
	started, err1 := strconv.ParseInt(a, 10, 64)
	seq, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return cursor{}, fmt.Errorf("%w %q", ErrInvalidCursor, s)
	}
	return cursor{startedAt: started, seq: seq}, nil
}

const runColumns = `exec_id, request_id, owner, user_id, tenant, tool, status, started_at, finished_at, duration_ms, step_count, error, parent_exec_id,
	goal, first_step, tokens_in, tokens_out, ` + resumeColumn

// scanRun scans runColumns followed by extra destinations.
func scanRun(row interface{ Scan(...any) error }, extra ...any) (*Run, error) {
	var r Run
	var status string
	var started int64
	var finished sql.NullInt64
	var resume int
	dest := append([]any{&r.ExecID, &r.RequestID, &r.Owner, &r.UserID, &r.Tenant, &r.Tool, &status, &started, &finished,
		&r.DurationMS, &r.StepCount, &r.Error, &r.ParentExecID, &r.Goal, &r.FirstStep, &r.TokensIn, &r.TokensOut, &resume}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	r.Status = Status(status)
	r.resumeState(resume)
	r.StartedAt = time.Unix(0, started).UTC()
	r.FinishedAt = fromNull(finished)
	return &r, nil
}

// jsonText checks raw JSON and returns it as a nullable text value.
func jsonText(raw json.RawMessage) (sql.NullString, error) {
	if len(raw) == 0 {
		return sql.NullString{}, nil
	}
	if !json.Valid(raw) {
		return sql.NullString{}, errors.New("not valid JSON")
	}
	return sql.NullString{String: string(raw), Valid: true}, nil
}

func rawJSON(s sql.NullString) json.RawMessage {
	if !s.Valid {
		return nil
	}
	return json.RawMessage(s.String)
}

func nullTime(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixNano(), Valid: true}
}

func fromNull(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}

// isConstraint reports whether err is the SQLite constraint violation code.
func isConstraint(err error, code int) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code() == code
}

// envelopeFacts are what FinishRun reads from a run's envelope.
type envelopeFacts struct {
	err                 string // the first error, "code: message"
	tokensIn, tokensOut int64  // the model tokens it counts
}

// readEnvelope reads the model tokens a result envelope counts — its
// planner's, its agents' (artifact.agents), and the model turns among its
// steps (an agent's run) — and, when withError, summarizes its first
// error. An envelope that mentions no tokens and whose error is not
// wanted is not parsed.
func readEnvelope(envelope json.RawMessage, withError bool) envelopeFacts {
	if len(envelope) == 0 || !withError && !bytes.Contains(envelope, []byte("tokens")) {
		return envelopeFacts{}
	}
	type apiError struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Step    any    `json:"step"`
	}
	var env struct {
		Artifact struct {
			Errors           []apiError `json:"errors"`
			ValidationErrors []apiError `json:"validation_errors"`
			Planner          *struct {
				InputTokens  int64 `json:"input_tokens"`
				OutputTokens int64 `json:"output_tokens"`
			} `json:"planner"`
			Agents *struct {
				TokensIn  int64 `json:"tokens_in"`
				TokensOut int64 `json:"tokens_out"`
			} `json:"agents"`
			Steps []struct {
				Type   string          `json:"type"`
				Output json.RawMessage `json:"output"` // any JSON; a model turn's is an object
			} `json:"steps"`
		} `json:"artifact"`
	}
	if json.Unmarshal(envelope, &env) != nil {
		return envelopeFacts{}
	}
	var f envelopeFacts
	a := env.Artifact
	if p := a.Planner; p != nil {
		f.tokensIn, f.tokensOut = p.InputTokens, p.OutputTokens
	}
	if ag := a.Agents; ag != nil {
		f.tokensIn, f.tokensOut = f.tokensIn+ag.TokensIn, f.tokensOut+ag.TokensOut
	}
	for _, st := range a.Steps {
		var turn struct {
			TokensIn  int64 `json:"tokens_in"`
			TokensOut int64 `json:"tokens_out"`
		}
		if st.Type == "model" && json.Unmarshal(st.Output, &turn) == nil {
			f.tokensIn, f.tokensOut = f.tokensIn+turn.TokensIn, f.tokensOut+turn.TokensOut
		}
	}
	if !withError {
		return f
	}
	for _, list := range [][]apiError{a.Errors, a.ValidationErrors} {
		for _, e := range list {
			switch {
			case e.Code != "" && e.Message != "":
				f.err = e.Code + ": " + e.Message
			case e.Message != "":
				f.err = e.Message
			case e.Code != "":
				f.err = e.Code
			default:
				continue
			}
			return f
		}
	}
	return f
}
