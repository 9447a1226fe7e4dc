package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Limits of the insights kept.
const (
	// MaxInsightsPerTool caps the insights kept per owner and tool; the
	// least seen, then the oldest, go first.
	MaxInsightsPerTool = 20
	// MaxInsightsPerOwner caps the insights kept per owner (and tenant)
	// over every tool: tool names are the caller's to choose (client
	// tools), so the per-tool cap alone bounds nothing.
	MaxInsightsPerOwner = 500
	// MaxInsights caps the insights kept in all; the oldest go first.
	MaxInsights = 50_000
	// InsightMaxAge is how long an insight not seen again is kept.
	InsightMaxAge = 30 * 24 * time.Hour
)

// Insight is a lesson distilled from past runs about one tool: a validation
// error the planner's repair fixed, a tool error and the arguments that
// caused it, a timeout, or a one-sentence reflection on a failed run.
type Insight struct {
	// Owner and Tenant are whose runs it was learned from, as Run.Owner
	// and Run.Tenant; a reader sees only those its Scope sees.
	Owner  string `json:"-"`
	Tenant string `json:"-"`
	// Tool is the tool it concerns.
	Tool string `json:"tool"`
	// Key says what makes two lessons the same (kind, argument, error
	// code); a lesson seen again under the same key is counted, and its
	// text is the latest.
	Key string `json:"key"`
	// Kind is "repair", "tool_error", "timeout" or "reflection".
	Kind string `json:"kind"`
	// Lesson is the text the planner is shown.
	Lesson string `json:"lesson"`
	// Count is how often it was seen.
	Count int `json:"count"`
	// FirstSeen and LastSeen are when it was first and last seen (UTC).
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
}

// InsightQuery selects insights.
type InsightQuery struct {
	// Scope limits them to an owner's; the zero Scope sees every owner's.
	Scope Scope
	// Tools limits them to these tools; empty means every tool.
	Tools []string
	// Limit caps how many are returned, the most seen first; 0 means all.
	Limit int
	// Offset skips the first insights of the order, for paging.
	Offset int
}

// RecordInsights counts each insight — a new one is added, one seen before
// (same owner, tenant, tool and key) is counted again and takes the new lesson's
// text — then keeps at most [MaxInsightsPerTool] per owner and tool,
// [MaxInsightsPerOwner] per owner and [MaxInsights] in all, and deletes
// those not seen for [InsightMaxAge]. It waits for the commit.
func (s *Store) RecordInsights(ctx context.Context, ins ...Insight) error {
	if len(ins) == 0 {
		return nil
	}
	now := s.now().UTC()
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("recording insights: %w", err)
	}
	defer tx.Rollback()
	type ownerTool struct{ owner, tenant, tool string }
	type owner struct{ owner, tenant string }
	touched := map[ownerTool]bool{}
	owners := map[owner]bool{}
	for _, in := range ins {
		if in.Tool == "" || in.Key == "" || in.Lesson == "" {
			return errors.New("recording insights: an insight needs a tool, a key and a lesson")
		}
		at := in.LastSeen
		if at.IsZero() {
			at = now
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO insights (owner, tenant, tool, key, kind, lesson, count, first_seen, last_seen)
			VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?)
			ON CONFLICT (owner, tenant, tool, key) DO UPDATE SET
				count = insights.count + 1, lesson = excluded.lesson, kind = excluded.kind, last_seen = excluded.last_seen`,
			in.Owner, in.Tenant, in.Tool, in.Key, in.Kind, in.Lesson, at.UnixNano(), at.UnixNano()); err != nil {
			return fmt.Errorf("recording insights: %w", err)
		}
		touched[ownerTool{in.Owner, in.Tenant, in.Tool}] = true
		owners[owner{in.Owner, in.Tenant}] = true
	}
	for ot := range touched {
		if _, err := tx.ExecContext(ctx, `DELETE FROM insights WHERE owner = ? AND tenant = ? AND tool = ? AND key NOT IN (
			SELECT key FROM insights WHERE owner = ? AND tenant = ? AND tool = ? ORDER BY count DESC, last_seen DESC LIMIT ?)`,
			ot.owner, ot.tenant, ot.tool, ot.owner, ot.tenant, ot.tool, MaxInsightsPerTool); err != nil {
			return fmt.Errorf("recording insights: %w", err)
		}
	}
	for o := range owners {
		if _, err := tx.ExecContext(ctx, `DELETE FROM insights WHERE owner = ? AND tenant = ? AND (tool, key) NOT IN (
			SELECT tool, key FROM insights WHERE owner = ? AND tenant = ? ORDER BY count DESC, last_seen DESC LIMIT ?)`,
			o.owner, o.tenant, o.owner, o.tenant, cmp.Or(s.insightCaps.perOwner, MaxInsightsPerOwner)); err != nil {
			return fmt.Errorf("recording insights: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM insights WHERE last_seen < ?`, now.Add(-InsightMaxAge).UnixNano()); err != nil {
		return fmt.Errorf("recording insights: %w", err)
	}
	var total int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM insights`).Scan(&total); err != nil {
		return fmt.Errorf("recording insights: %w", err)
	}
	if over := total - cmp.Or(s.insightCaps.total, MaxInsights); over > 0 {
		if _, err := tx.ExecContext(ctx, `DELETE FROM insights WHERE (owner, tenant, tool, key) IN (
			SELECT owner, tenant, tool, key FROM insights ORDER BY last_seen ASC, count ASC LIMIT ?)`, over); err != nil {
			return fmt.Errorf("recording insights: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("recording insights: %w", err)
	}
	return nil
}

// Insights returns the insights q selects that were seen within
// [InsightMaxAge], the most seen first, then the most recent.
func (s *Store) Insights(ctx context.Context, q InsightQuery) ([]Insight, error) {
	where, args := q.Scope.where()
	where = append(where, "last_seen >= ?")
	args = append(args, s.now().Add(-InsightMaxAge).UnixNano())
	if len(q.Tools) > 0 {
		where = append(where, "tool IN (?"+strings.Repeat(", ?", len(q.Tools)-1)+")")
		for _, t := range q.Tools {
			args = append(args, t)
		}
	}
	query := `SELECT owner, tenant, tool, key, kind, lesson, count, first_seen, last_seen FROM insights WHERE ` +
		strings.Join(where, " AND ") + ` ORDER BY count DESC, last_seen DESC, tool, key`
	if q.Limit > 0 || q.Offset > 0 {
		limit := q.Limit
		if limit <= 0 {
			limit = math.MaxInt32
		}
		query += ` LIMIT ? OFFSET ?`
		args = append(args, limit, q.Offset)
	}
	rows, err := s.reader.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("reading insights: %w", err)
	}
	defer rows.Close()
	out := []Insight{}
	for rows.Next() {
		var in Insight
		var first, last int64
		if err := rows.Scan(&in.Owner, &in.Tenant, &in.Tool, &in.Key, &in.Kind, &in.Lesson, &in.Count, &first, &last); err != nil {
			return nil, fmt.Errorf("reading insights: %w", err)
		}
		in.FirstSeen, in.LastSeen = time.Unix(0, first).UTC(), time.Unix(0, last).UTC()
		out = append(out, in)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading insights: %w", err)
	}
	return out, nil
}

// ClearInsights deletes the insights the scope sees and returns how many.
func (s *Store) ClearInsights(ctx context.Context, scope Scope) (int, error) {
	query := `DELETE FROM insights`
	where, args := scope.where()
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	res, err := s.writer.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, fmt.Errorf("clearing insights: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}
