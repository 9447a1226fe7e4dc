package orchestrate

import (
	"sync"
	"testing"

	"github.com/google/uuid"
)

func TestDefaultIDsAreDistinctVersion4UUIDs(t *testing.T) {
	u := newUUIDs()
	const n = 4 * 256 // several refills of the buffer
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range n / 4 {
				s := u.next()
				id, err := uuid.Parse(s)
				if err != nil || id.Version() != 4 || id.Variant() != uuid.RFC4122 {
					t.Errorf("id %q is not a version 4 UUID (err %v)", s, err)
				}
				mu.Lock()
				if seen[s] {
					t.Errorf("id %q made twice", s)
				}
				seen[s] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("%d distinct ids, want %d", len(seen), n)
	}
}
