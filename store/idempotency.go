package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// MaxIdempotencyKeyBytes caps an idempotency key.
const MaxIdempotencyKeyBytes = 255

// IdempotencyKey names the first call a caller made with a key: a
// caller's (Owner, as Run.Owner, within Tenant) key.
type IdempotencyKey struct {
	Owner, Tenant, Key string
}

// Claim is the state of an idempotency key as [Store.ClaimIdempotencyKey]
// and [Store.IdempotencyClaim] find it.
type Claim struct {
	// Won reports that this call claimed the key: it runs, and records its
	// result with [Store.FinishIdempotencyKey] (or gives the key up with
	// [Store.ReleaseIdempotencyKey]).
	Won bool
	// Hash is the canonical hash of the input of the call that holds the key.
	Hash string
	// ExecID is the run of that call, once it is known.
	ExecID string
	// Result is that call's tool result, as JSON; nil while it runs.
	Result []byte
	// ClaimedAt is when that call claimed the key (UTC).
	ClaimedAt time.Time
}

func (k IdempotencyKey) check() error {
	if k.Key == "" || len(k.Key) > MaxIdempotencyKeyBytes {
		return fmt.Errorf("an idempotency key must be 1 to %d bytes, not %d", MaxIdempotencyKeyBytes, len(k.Key))
	}
	return nil
}

// ClaimIdempotencyKey claims k for a call whose input hashes to hash, for
// ttl. A key whose ttl lapsed, or whose call has held it without a result
// for longer than stale (its process died), is free again. Exactly one of
// several concurrent claims wins, whichever replica makes it: the claim is
// an insert that the table's primary key lets only one of them make, not a
// read followed by a write. A lost claim returns the holder's state.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, k IdempotencyKey, hash string, ttl, stale time.Duration) (Claim, error) {
	if err := k.check(); err != nil {
		return Claim{}, fmt.Errorf("claiming an idempotency key: %w", err)
	}
	now := s.now().UTC()
	// Free what lapsed: every expired key (an index range), and this key if
	// its holder went away without a result.
	if _, err := s.writer.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE expires_at < ?`, now.UnixNano()); err != nil {
		return Claim{}, fmt.Errorf("claiming an idempotency key: %w", err)
	}
	if _, err := s.writer.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE owner = ? AND tenant = ? AND key = ? AND result IS NULL AND claimed_at < ?`,
		k.Owner, k.Tenant, k.Key, now.Add(-stale).UnixNano()); err != nil {
		return Claim{}, fmt.Errorf("claiming an idempotency key: %w", err)
	}
	res, err := s.writer.ExecContext(ctx, `INSERT INTO idempotency_keys (owner, tenant, key, hash, claimed_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (owner, tenant, key) DO NOTHING`, k.Owner, k.Tenant, k.Key, hash, now.UnixNano(), now.Add(ttl).UnixNano())
	if err != nil {
		return Claim{}, fmt.Errorf("claiming an idempotency key: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return Claim{}, fmt.Errorf("claiming an idempotency key: %w", err)
	} else if n == 1 {
		return Claim{Won: true, Hash: hash, ClaimedAt: now}, nil
	}
	c, found, err := s.IdempotencyClaim(ctx, k)
	switch {
	case err != nil:
		return Claim{}, err
	case !found: // released between the insert and the read: try once more
		return s.ClaimIdempotencyKey(ctx, k, hash, ttl, stale)
	}
	return c, nil
}

// IdempotencyClaim returns the state of k, and false when no call holds it.
func (s *Store) IdempotencyClaim(ctx context.Context, k IdempotencyKey) (Claim, bool, error) {
	var c Claim
	var result sql.NullString
	var at int64
	err := s.reader.QueryRowContext(ctx, `SELECT hash, exec_id, result, claimed_at FROM idempotency_keys WHERE owner = ? AND tenant = ? AND key = ? AND expires_at >= ?`,
		k.Owner, k.Tenant, k.Key, s.now().UnixNano()).Scan(&c.Hash, &c.ExecID, &result, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return Claim{}, false, nil
	}
	if err != nil {
		return Claim{}, false, fmt.Errorf("reading an idempotency key: %w", err)
	}
	if result.Valid {
		c.Result = []byte(result.String)
	}
	c.ClaimedAt = time.Unix(0, at).UTC()
	return c, true, nil
}

// StartIdempotencyKey records the run of the call that holds k.
func (s *Store) StartIdempotencyKey(ctx context.Context, k IdempotencyKey, hash, execID string) error {
	if _, err := s.writer.ExecContext(ctx, `UPDATE idempotency_keys SET exec_id = ? WHERE owner = ? AND tenant = ? AND key = ? AND hash = ? AND result IS NULL`,
		execID, k.Owner, k.Tenant, k.Key, hash); err != nil {
		return fmt.Errorf("recording the run of an idempotency key: %w", err)
	}
	return nil
}

// FinishIdempotencyKey records result, the tool result of the call that
// holds k, for its repeats.
func (s *Store) FinishIdempotencyKey(ctx context.Context, k IdempotencyKey, hash, execID string, result []byte) error {
	if _, err := s.writer.ExecContext(ctx, `UPDATE idempotency_keys SET result = ?, exec_id = ? WHERE owner = ? AND tenant = ? AND key = ? AND hash = ? AND result IS NULL`,
		string(result), execID, k.Owner, k.Tenant, k.Key, hash); err != nil {
		return fmt.Errorf("recording the result of an idempotency key: %w", err)
	}
	return nil
}

// ReleaseIdempotencyKey frees k, held by a call whose input hashed to hash
// and that has no result: the next call with k runs.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, k IdempotencyKey, hash string) error {
	if _, err := s.writer.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE owner = ? AND tenant = ? AND key = ? AND hash = ? AND result IS NULL`,
		k.Owner, k.Tenant, k.Key, hash); err != nil {
		return fmt.Errorf("releasing an idempotency key: %w", err)
	}
	return nil
}
