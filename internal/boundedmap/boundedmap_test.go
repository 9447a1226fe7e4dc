package boundedmap

import (
	"sync"
	"testing"
)

func TestMapStartsOverPastItsBound(t *testing.T) {
	for _, max := range []int{0, 10} {
		c := Map[int, int]{Max: max}
		bound := max
		if bound == 0 {
			bound = DefaultMax
		}
		for i := range bound {
			c.Put(i, i)
		}
		if n := c.Len(); n != bound {
			t.Fatalf("Max %d: Len = %d after %d puts, want %d", max, n, bound, bound)
		}
		c.Put(bound, 1)
		if n := c.Len(); n != 1 {
			t.Errorf("Max %d: Len = %d after one put past the bound, want 1 (the map starts over)", max, n)
		}
		if _, ok := c.Get(0); ok {
			t.Errorf("Max %d: an entry from before the map started over is still there", max)
		}
	}
}

func TestMapKeepsTheFirstValue(t *testing.T) {
	var c Map[string, int]
	var wg sync.WaitGroup
	got := make([]int, 8)
	for i := range got {
		wg.Go(func() { got[i] = c.Put("k", i) })
	}
	wg.Wait()
	first, _ := c.Get("k")
	for i, v := range got {
		if v != first {
			t.Errorf("Put %d returned %d; every caller must get the value kept, %d", i, v, first)
		}
	}
}
