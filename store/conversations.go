package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/orchestra-mcp/orchestra/internal/textcut"
)

// Limits of the conversations kept.
const (
	// MaxTurnBytes caps each of a turn's goal and answer: a longer one is
	// cut (at a character boundary) when it is added.
	MaxTurnBytes = 16 << 10
	// DefaultMaxConversationTurns is how many turns of a conversation are
	// kept unless [Retention.MaxConversationTurns] says otherwise; the
	// oldest go first.
	DefaultMaxConversationTurns = 200
	// DefaultConversationMaxAge is how long a turn is kept unless
	// [Retention.ConversationMaxAge] says otherwise.
	DefaultConversationMaxAge = 30 * 24 * time.Hour
	// MaxContextIDBytes caps a context id.
	MaxContextIDBytes = 128
)

// ConversationKey names one conversation: a caller's (Owner, as Run.Owner,
// within Tenant) context id. The same context id of another caller is
// another conversation.
type ConversationKey struct {
	Owner, Tenant, ContextID string
}

// Turn is one turn of a conversation: a goal of the prompt path and the
// answer its run gave.
type Turn struct {
	// Seq orders the turns of a conversation, from 1.
	Seq int64 `json:"seq"`
	// Goal is the caller's prompt.
	Goal string `json:"goal"`
	// Answer is the run's answer ("" when it gave none).
	Answer string `json:"answer"`
	// ExecID is the run that answered.
	ExecID string `json:"exec_id,omitempty"`
	// At is when the turn was added (UTC).
	At time.Time `json:"at"`
}

// Conversation summarizes one conversation.
type Conversation struct {
	// ContextID is the caller's id of the conversation.
	ContextID string `json:"context_id"`
	// Owner and Tenant are whose it is, as Run.Owner and Run.Tenant.
	Owner  string `json:"owner,omitempty"`
	Tenant string `json:"tenant,omitempty"`
	// Turns counts its turns.
	Turns int `json:"turns"`
	// First and Last are when its first and last turns were added.
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
}

// scope is the scope of exactly k's owner and tenant.
func (k ConversationKey) scope() Scope { return OwnerScope(k.Owner).InTenant(k.Tenant) }

func (k ConversationKey) check() error {
	if k.ContextID == "" || len(k.ContextID) > MaxContextIDBytes {
		return fmt.Errorf("a context id must be 1 to %d bytes, not %d", MaxContextIDBytes, len(k.ContextID))
	}
	return nil
}

// AppendTurn adds t as the newest turn of k's conversation, its goal and
// answer cut to [MaxTurnBytes], then keeps the newest turns the retention
// allows ([Retention.MaxConversationTurns], [Retention.ConversationMaxAge]).
// It waits for the commit.
func (s *Store) AppendTurn(ctx context.Context, k ConversationKey, t Turn) error {
	if err := k.check(); err != nil {
		return fmt.Errorf("adding a conversation turn: %w", err)
	}
	at := t.At
	if at.IsZero() {
		at = s.now()
	}
	cut := MaxTurnBytes - len(textcut.Marker)
	goal, answer := textcut.Truncate(t.Goal, cut), textcut.Truncate(t.Answer, cut)
	// Two replicas adding to one conversation at once may pick the same
	// seq: the primary key refuses the second, which tries again.
	var err error
	for range 3 {
		if err = s.appendTurn(ctx, k, goal, answer, t.ExecID, at.UTC()); err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("adding a conversation turn: %w", err)
	}
	return nil
}

func (s *Store) appendTurn(ctx context.Context, k ConversationKey, goal, answer, execID string, at time.Time) error {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var seq int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) + 1 FROM conversation_turns WHERE owner = ? AND tenant = ? AND context_id = ?`,
		k.Owner, k.Tenant, k.ContextID).Scan(&seq); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO conversation_turns (owner, tenant, context_id, seq, goal, answer, exec_id, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		k.Owner, k.Tenant, k.ContextID, seq, goal, answer, execID, at.UnixNano()); err != nil {
		return err
	}
	keep := cmp.Or(s.keep.MaxConversationTurns, DefaultMaxConversationTurns)
	if seq > int64(keep) {
		if _, err := tx.ExecContext(ctx, `DELETE FROM conversation_turns WHERE owner = ? AND tenant = ? AND context_id = ? AND seq <= ?`,
			k.Owner, k.Tenant, k.ContextID, seq-int64(keep)); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM conversation_turns WHERE at < ?`, s.conversationHorizon().UnixNano()); err != nil {
		return err
	}
	return tx.Commit()
}

// conversationHorizon is the time before which turns are no longer kept.
func (s *Store) conversationHorizon() time.Time {
	return s.now().Add(-cmp.Or(s.keep.ConversationMaxAge, DefaultConversationMaxAge))
}

// RecentTurns returns the newest turns of k's conversation whose goals and
// answers together take at most maxBytes (0: every turn kept), oldest first.
func (s *Store) RecentTurns(ctx context.Context, k ConversationKey, maxBytes int) ([]Turn, error) {
	if err := k.check(); err != nil {
		return nil, fmt.Errorf("reading a conversation: %w", err)
	}
	return s.turns(ctx, k.scope(), k.ContextID, maxBytes)
}

// TurnsIn returns the turns of the conversation contextID that scope sees,
// oldest first; [ErrNotFound] when it has none.
func (s *Store) TurnsIn(ctx context.Context, scope Scope, contextID string) ([]Turn, error) {
	turns, err := s.turns(ctx, scope, contextID, 0)
	if err == nil && len(turns) == 0 {
		err = fmt.Errorf("reading conversation %q: %w", contextID, ErrNotFound)
	}
	return turns, err
}

func (s *Store) turns(ctx context.Context, scope Scope, contextID string, maxBytes int) ([]Turn, error) {
	if err := s.Flush(ctx); err != nil {
		return nil, fmt.Errorf("reading a conversation: %w", err)
	}
	where, args := scope.where()
	where = append(where, "context_id = ?", "at >= ?")
	args = append(args, contextID, s.conversationHorizon().UnixNano())
	rows, err := s.reader.QueryContext(ctx, `SELECT seq, goal, answer, exec_id, at FROM conversation_turns WHERE `+
		strings.Join(where, " AND ")+` ORDER BY seq DESC`, args...)
	if err != nil {
		return nil, fmt.Errorf("reading a conversation: %w", err)
	}
	defer rows.Close()
	var out []Turn
	used := 0
	for rows.Next() {
		var t Turn
		var at int64
		if err := rows.Scan(&t.Seq, &t.Goal, &t.Answer, &t.ExecID, &at); err != nil {
			return nil, fmt.Errorf("reading a conversation: %w", err)
		}
		if used += len(t.Goal) + len(t.Answer); maxBytes > 0 && used > maxBytes {
			break
		}
		t.At = time.Unix(0, at).UTC()
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading a conversation: %w", err)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// Conversations lists the conversations scope sees, the most recent first,
// at most limit of them (0: all).
func (s *Store) Conversations(ctx context.Context, scope Scope, limit int) ([]Conversation, error) {
	if err := s.Flush(ctx); err != nil {
		return nil, fmt.Errorf("listing conversations: %w", err)
	}
	where, args := scope.where()
	where = append(where, "at >= ?")
	args = append(args, s.conversationHorizon().UnixNano())
	query := `SELECT owner, tenant, context_id, COUNT(*), MIN(at), MAX(at) FROM conversation_turns WHERE ` +
		strings.Join(where, " AND ") + ` GROUP BY owner, tenant, context_id ORDER BY MAX(at) DESC, context_id`
	if limit > 0 {
		query += ` LIMIT ?`
		args = append(args, limit)
	}
	rows, err := s.reader.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("listing conversations: %w", err)
	}
	defer rows.Close()
	out := []Conversation{}
	for rows.Next() {
		var c Conversation
		var first, last int64
		if err := rows.Scan(&c.Owner, &c.Tenant, &c.ContextID, &c.Turns, &first, &last); err != nil {
			return nil, fmt.Errorf("listing conversations: %w", err)
		}
		c.First, c.Last = time.Unix(0, first).UTC(), time.Unix(0, last).UTC()
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing conversations: %w", err)
	}
	return out, nil
}

// ClearConversations deletes the turns of the conversation contextID that
// scope sees, or of every conversation it sees when contextID is "", and
// returns how many turns it deleted.
func (s *Store) ClearConversations(ctx context.Context, scope Scope, contextID string) (int, error) {
	if err := s.Flush(ctx); err != nil {
		return 0, fmt.Errorf("clearing conversations: %w", err)
	}
	where, args := scope.where()
	if contextID != "" {
		where = append(where, "context_id = ?")
		args = append(args, contextID)
	}
	query := `DELETE FROM conversation_turns`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	res, err := s.writer.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, fmt.Errorf("clearing conversations: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, errors.Join(errors.New("clearing conversations"), err)
	}
	return int(n), nil
}
