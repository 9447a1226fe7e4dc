package schemas

import (
	"sync"
	"testing"
)

func TestCacheStartsOverPastItsBound(t *testing.T) {
	var c cache[int, int]
	for i := range maxCached {
		c.put(i, i)
	}
	if n := c.len(); n != maxCached {
		t.Fatalf("len = %d after %d puts, want %d", n, maxCached, maxCached)
	}
	c.put(maxCached, 1)
	if n := c.len(); n != 1 {
		t.Errorf("len = %d after one put past the bound, want 1 (the cache starts over)", n)
	}
	if _, ok := c.get(0); ok {
		t.Error("an entry from before the cache started over is still there")
	}
}

func TestCacheKeepsTheFirstValue(t *testing.T) {
	var c cache[string, int]
	var wg sync.WaitGroup
	got := make([]int, 8)
	for i := range got {
		wg.Go(func() { got[i] = c.put("k", i) })
	}
	wg.Wait()
	first, _ := c.get("k")
	for i, v := range got {
		if v != first {
			t.Errorf("put %d returned %d; every caller must get the value kept, %d", i, v, first)
		}
	}
}
