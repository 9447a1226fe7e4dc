package store

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestOwnerScope: a reader limited to an owner sees only that owner's
// runs, in lists and pages and by id; the zero scope sees them all.
func TestOwnerScope(t *testing.T) {
	both(t, func(t *testing.T, path string) {
		ctx := t.Context()
		s := openTest(t, path, Options{})
		base := time.Unix(1700000000, 0)
		for i, owner := range []string{"token:a", "token:b", "", "token:a", "token:b", "token:a"} {
			r := Run{ExecID: string(rune('0' + i)), Owner: owner, Tool: "agent_orchestrate", StartedAt: base.Add(time.Duration(i) * time.Second)}
			if err := s.StartRun(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		ids := func(scope Scope, limit int) []string {
			var out []string
			cursor := ""
			for {
				runs, next, err := s.List(ctx, ListOptions{Scope: scope, Limit: limit, Cursor: cursor})
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range runs {
					if !scope.Sees(r.Owner) {
						t.Errorf("scope %+v listed run %s of %q", scope, r.ExecID, r.Owner)
					}
					out = append(out, r.ExecID)
				}
				if next == "" {
					return out
				}
				cursor = next
			}
		}
		if diff := cmp.Diff([]string{"5", "3", "0"}, ids(OwnerScope("token:a"), 2)); diff != "" {
			t.Errorf("token:a (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"2"}, ids(OwnerScope(""), 2)); diff != "" {
			t.Errorf("the machine's own runs (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"5", "4", "3", "2", "1", "0"}, ids(Scope{}, 4)); diff != "" {
			t.Errorf("every run (-want +got):\n%s", diff)
		}
		if _, _, err := s.GetIn(ctx, OwnerScope("token:b"), "0"); !errors.Is(err, ErrNotFound) {
			t.Errorf("token:b reading token:a's run: %v, want ErrNotFound", err)
		}
		r, _, err := s.GetIn(ctx, OwnerScope("token:a"), "0")
		if err != nil || r.Owner != "token:a" {
			t.Errorf("token:a reading its run: %+v, %v", r, err)
		}
		if r, _, err := s.Get(ctx, "1"); err != nil || r.Owner != "token:b" {
			t.Errorf("Get sees every run: %+v, %v", r, err)
		}
	})
}

// TestMigrateOwner opens a database written before runs had owners: its
// runs belong to the machine, and crash recovery still finds the
// instance that ran them.
func TestMigrateOwner(t *testing.T) {
	path := tempDB(t)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	stmts := []string{
		`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`,
		migrations[0].sql,
		`INSERT INTO schema_migrations VALUES (1, '0001_init', 0)`,
		`INSERT INTO runs (exec_id, tool, status, started_at, owner) VALUES ('old', 'cli', 'running', 1, 'gone-instance')`,
	}
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	s := openTest(t, path, Options{})
	r, _, err := s.Get(t.Context(), "old")
	if err != nil {
		t.Fatal(err)
	}
	if r.Owner != "" || r.Status != StatusInterrupted {
		t.Errorf("the old run: owner %q status %s; want the machine's, interrupted (its instance is gone)", r.Owner, r.Status)
	}
}
