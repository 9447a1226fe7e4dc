package schemas

import "sync"

// maxCached bounds each cache: as schemas are replaced (a downstream server
// restarts), a cache past maxCached entries starts over.
const maxCached = 1 << 16

// cache is a bounded, concurrency-safe map. Its typed keys hash without
// the reflection an interface-keyed sync.Map needs on every lookup.
type cache[K comparable, V any] struct {
	mu sync.RWMutex
	m  map[K]V
}

func (c *cache[K, V]) get(k K) (V, bool) {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	return v, ok
}

// put stores v under k, unless another caller stored a value first, and
// returns the value kept.
func (c *cache[K, V]) put(k K, v V) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[k]; ok {
		return old
	}
	if c.m == nil || len(c.m) >= maxCached {
		c.m = make(map[K]V)
	}
	c.m[k] = v
	return v
}

// len returns the number of entries.
func (c *cache[K, V]) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}
