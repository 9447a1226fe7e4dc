// Package boundedmap is a concurrency-safe memo map that cannot grow without
// bound: past its limit it starts over.
package boundedmap

import "sync"

// Map is a bounded, concurrency-safe map. Its typed keys hash without the
// reflection an interface-keyed sync.Map needs on every lookup. The zero
// Map holds up to DefaultMax entries.
type Map[K comparable, V any] struct {
	// Max is the number of entries past which the map starts over; 0
	// means DefaultMax.
	Max int

	mu sync.RWMutex
	m  map[K]V
}

// DefaultMax is the bound of a Map whose Max is 0.
const DefaultMax = 1 << 16

// Get returns the value stored under k.
func (c *Map[K, V]) Get(k K) (V, bool) {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	return v, ok
}

// Put stores v under k, unless another caller stored a value first, and
// returns the value kept. A map that holds Max entries is emptied first.
func (c *Map[K, V]) Put(k K, v V) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[k]; ok {
		return old
	}
	max := c.Max
	if max <= 0 {
		max = DefaultMax
	}
	if c.m == nil || len(c.m) >= max {
		c.m = make(map[K]V)
	}
	c.m[k] = v
	return v
}

// Len returns the number of entries.
func (c *Map[K, V]) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}
