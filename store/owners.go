package store

import (
	"context"
	"fmt"
	"strings"
)

// ownerPrefixes are the namespaces of owners: how the caller
// authenticated. An owner without one of them was written before owners
// were namespaced.
var ownerPrefixes = []string{"static:", "jwt:"}

// legacyOwner reports whether owner was written before owners were
// namespaced.
func legacyOwner(owner string) bool {
	if owner == "" {
		return false
	}
	for _, p := range ownerPrefixes {
		if strings.HasPrefix(owner, p) {
			return false
		}
	}
	return true
}

// RenameOwners gives the runs and insights of each owner written before
// owners were namespaced the owner rename returns for it; an owner rename
// declines (one that could be either kind of caller) keeps its bare name,
// which no authenticated caller has any more: only the machine's own
// callers (stdio, the CLI) see those records. It returns how many owners
// were renamed; running it again renames nothing more.
func (s *Store) RenameOwners(ctx context.Context, rename func(owner string) (string, bool)) (int, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT owner FROM runs WHERE owner <> '' UNION SELECT owner FROM insights WHERE owner <> ''`)
	if err != nil {
		return 0, fmt.Errorf("renaming owners: %w", err)
	}
	var legacy []string
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			rows.Close()
			return 0, fmt.Errorf("renaming owners: %w", err)
		}
		if legacyOwner(o) {
			legacy = append(legacy, o)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("renaming owners: %w", err)
	}
	n := 0
	for _, old := range legacy {
		to, ok := rename(old)
		if !ok || to == old || legacyOwner(to) {
			continue
		}
		if err := s.renameOwner(ctx, old, to); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func (s *Store) renameOwner(ctx context.Context, from, to string) error {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("renaming owner: %w", err)
	}
	defer tx.Rollback()
	for _, q := range []string{
		`UPDATE runs SET owner = ? WHERE owner = ?`,
		// A lesson the new owner has learned again since wins.
		`DELETE FROM insights WHERE owner = ? AND EXISTS (SELECT 1 FROM insights i WHERE i.owner = ? AND i.tenant = insights.tenant AND i.tool = insights.tool AND i.key = insights.key)`,
		`UPDATE insights SET owner = ? WHERE owner = ?`,
	} {
		args := []any{to, from}
		if strings.HasPrefix(q, "DELETE") {
			args = []any{from, to}
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("renaming owner: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("renaming owner: %w", err)
	}
	return nil
}
