package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Workflows: plans kept under a name (package workflows), scoped like the
// records of runs. Names are per owner and tenant: two callers may each
// keep a workflow of one name, and neither learns of the other's; saving a
// name again adds a version.

// ErrWorkflowNotFound means no workflow of that name (or version) is
// visible in the scope of the read.
var ErrWorkflowNotFound = errors.New("workflow not found")

// ErrWorkflowVersion means a version to save as (an import's) is not
// newer than the newest one stored.
var ErrWorkflowVersion = errors.New("the workflow already has that version or a newer one")

// Workflow is one version of a stored workflow.
type Workflow struct {
	// Owner and Tenant are whose it is, as Run.Owner and Run.Tenant.
	Owner  string
	Tenant string
	// Name is the workflow's name; its tool is workflow__<Name>.
	Name string
	// Version counts the saves of Name from 1. SaveWorkflow sets it to
	// the next one, or keeps one it is given that is newer than the
	// newest stored (an import keeps the versions it exported).
	Version     int
	Description string
	// Parameters is the JSON Schema of its parameters, Plan its plan.
	Parameters json.RawMessage
	Plan       json.RawMessage
	// SavedFrom is the exec id of the run it was saved from, if any.
	SavedFrom string
	// CreatedAt is when this version was saved; SaveWorkflow sets it.
	CreatedAt time.Time
}

// SaveWorkflow stores w as the next version of its name for its owner and
// tenant (or as w.Version, when that is set and newer than the newest
// stored; [ErrWorkflowVersion] when it is not) and returns that version.
// What other owners and tenants keep under the name plays no part.
func (s *Store) SaveWorkflow(ctx context.Context, w Workflow) (int, error) {
	if w.Name == "" || len(w.Parameters) == 0 || len(w.Plan) == 0 {
		return 0, errors.New("saving a workflow: a name, parameters and a plan are required")
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("saving workflow %s: %w", w.Name, err)
	}
	defer tx.Rollback()
	if s.pg { // two replicas saving one name: one at a time
		if _, err := tx.ExecContext(ctx, `LOCK TABLE workflows IN EXCLUSIVE MODE`); err != nil {
			return 0, fmt.Errorf("saving workflow %s: %w", w.Name, err)
		}
	}
	var last int
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM workflows WHERE name = ? AND owner = ? AND tenant = ?`,
		w.Name, w.Owner, w.Tenant).Scan(&last); err != nil {
		return 0, fmt.Errorf("saving workflow %s: %w", w.Name, err)
	}
	version := last + 1
	if w.Version > 0 {
		if w.Version <= last {
			return 0, fmt.Errorf("saving workflow %s version %d (the newest stored is %d): %w", w.Name, w.Version, last, ErrWorkflowVersion)
		}
		version = w.Version
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO workflows (owner, tenant, name, version, description, parameters, plan, saved_from, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		w.Owner, w.Tenant, w.Name, version, w.Description, string(w.Parameters), string(w.Plan), w.SavedFrom, s.now().UnixNano()); err != nil {
		return 0, fmt.Errorf("saving workflow %s: %w", w.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("saving workflow %s: %w", w.Name, err)
	}
	return version, nil
}

const workflowColumns = `owner, tenant, name, version, description, parameters, plan, saved_from, created_at`

// Workflows returns the newest version of every workflow scope sees,
// sorted by name, tenant and owner.
func (s *Store) Workflows(ctx context.Context, scope Scope) ([]Workflow, error) {
	where, args := scope.where()
	cond := ""
	if len(where) > 0 {
		cond = ` AND ` + strings.Join(where, " AND ")
	}
	return s.readWorkflows(ctx, `SELECT `+workflowColumns+` FROM workflows w WHERE version = (
		SELECT max(version) FROM workflows v WHERE v.owner = w.owner AND v.tenant = w.tenant AND v.name = w.name)`+cond+`
		ORDER BY name, tenant, owner`, args...)
}

// WorkflowVersions returns every version of the workflow name that scope
// sees, newest first; [ErrWorkflowNotFound] when there is none.
func (s *Store) WorkflowVersions(ctx context.Context, scope Scope, name string) ([]Workflow, error) {
	where, args := scope.where()
	where = append(where, "name = ?")
	args = append(args, name)
	ws, err := s.readWorkflows(ctx, `SELECT `+workflowColumns+` FROM workflows WHERE `+strings.Join(where, " AND ")+` ORDER BY version DESC`, args...)
	if err == nil && len(ws) == 0 {
		err = fmt.Errorf("workflow %q: %w", name, ErrWorkflowNotFound)
	}
	return ws, err
}

// Workflow returns version of the workflow name that scope sees, the
// newest when version is 0.
func (s *Store) Workflow(ctx context.Context, scope Scope, name string, version int) (*Workflow, error) {
	where, args := scope.where()
	where = append(where, "name = ?")
	args = append(args, name)
	if version > 0 {
		where = append(where, "version = ?")
		args = append(args, version)
	}
	ws, err := s.readWorkflows(ctx, `SELECT `+workflowColumns+` FROM workflows WHERE `+strings.Join(where, " AND ")+` ORDER BY version DESC LIMIT 1`, args...)
	if err != nil {
		return nil, err
	}
	if len(ws) == 0 {
		if version > 0 {
			return nil, fmt.Errorf("workflow %q version %d: %w", name, version, ErrWorkflowNotFound)
		}
		return nil, fmt.Errorf("workflow %q: %w", name, ErrWorkflowNotFound)
	}
	return &ws[0], nil
}

// DeleteWorkflow deletes every version of the workflow name that scope
// sees and returns how many; [ErrWorkflowNotFound] when there was none.
func (s *Store) DeleteWorkflow(ctx context.Context, scope Scope, name string) (int, error) {
	where, args := scope.where()
	where = append(where, "name = ?")
	args = append(args, name)
	res, err := s.writer.ExecContext(ctx, `DELETE FROM workflows WHERE `+strings.Join(where, " AND "), args...)
	if err != nil {
		return 0, fmt.Errorf("deleting workflow %s: %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("deleting workflow %s: %w", name, err)
	}
	if n == 0 {
		return 0, fmt.Errorf("workflow %q: %w", name, ErrWorkflowNotFound)
	}
	return int(n), nil
}

func (s *Store) readWorkflows(ctx context.Context, query string, args ...any) ([]Workflow, error) {
	rows, err := s.reader.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("reading workflows: %w", err)
	}
	defer rows.Close()
	out := []Workflow{}
	for rows.Next() {
		var w Workflow
		var params, plan string
		var created int64
		if err := rows.Scan(&w.Owner, &w.Tenant, &w.Name, &w.Version, &w.Description, &params, &plan, &w.SavedFrom, &created); err != nil {
			return nil, fmt.Errorf("reading workflows: %w", err)
		}
		w.Parameters, w.Plan = json.RawMessage(params), json.RawMessage(plan)
		w.CreatedAt = time.Unix(0, created).UTC()
		out = append(out, w)
	}
	if err := rows.Err(); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("reading workflows: %w", err)
	}
	return out, nil
}
