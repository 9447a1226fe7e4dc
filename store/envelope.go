package store

import (
	"context"
	"encoding/json"
	"fmt"
)

// UpdateEnvelope replaces the envelope of a finished run, once the writes
// queued before it are applied: for what is added to a run's envelope after
// it finished, such as the answer orchestra ask writes from the results. An
// unknown id is [ErrNotFound].
func (s *Store) UpdateEnvelope(ctx context.Context, execID string, envelope json.RawMessage) error {
	if err := s.Flush(ctx); err != nil {
		return fmt.Errorf("updating the envelope of run %s: %w", execID, err)
	}
	res, err := s.writer.ExecContext(ctx, `UPDATE runs SET envelope = ? WHERE exec_id = ?`, string(envelope), execID)
	if err != nil {
		return fmt.Errorf("updating the envelope of run %s: %w", execID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("updating the envelope of run %s: %w", execID, err)
	} else if n == 0 {
		return fmt.Errorf("updating the envelope of run %s: %w", execID, ErrNotFound)
	}
	return nil
}
