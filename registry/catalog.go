package registry

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Catalog is a concurrency-safe set of tools keyed by name.
// The zero value is not usable; call NewCatalog.
type Catalog struct {
	mu       sync.RWMutex
	tools    map[string]Tool
	version  uint64
	watchers []func()
}

// NewCatalog returns a catalog holding tools. It panics if two tools share a
// name or a name is invalid: that is a programming mistake.
func NewCatalog(tools ...Tool) *Catalog {
	c := &Catalog{tools: make(map[string]Tool)}
	if err := c.Add(tools...); err != nil {
		panic(err)
	}
	return c
}

// Add adds tools. It adds none of them and returns an error naming every
// problem if any tool has an invalid name or a name already taken.
func (c *Catalog) Add(tools ...Tool) error {
	c.mu.Lock()
	var problems []string
	seen := map[string]bool{}
	for _, t := range tools {
		switch {
		case !NamePattern.MatchString(t.Name):
			problems = append(problems, fmt.Sprintf("invalid tool name %q: names must match %s", t.Name, NamePattern))
		case seen[t.Name]:
			problems = append(problems, fmt.Sprintf("tool %q is defined twice", t.Name))
		default:
			if old, ok := c.tools[t.Name]; ok {
				problems = append(problems, fmt.Sprintf("tool %q from %s collides with the tool of that name from %s", t.Name, sourceName(t), sourceName(old)))
			}
		}
		seen[t.Name] = true
	}
	if len(problems) > 0 {
		c.mu.Unlock()
		return fmt.Errorf("adding tools: %s", strings.Join(problems, "; "))
	}
	for _, t := range tools {
		c.tools[t.Name] = t
	}
	return c.changed()
}

// ReplaceSource replaces every tool whose Source is source with tools, in
// one change. Tools whose names collide with another source's are not added
// and are reported in the error; the others are.
func (c *Catalog) ReplaceSource(source string, tools []Tool) error {
	c.mu.Lock()
	for name, t := range c.tools {
		if t.Source == source {
			delete(c.tools, name)
		}
	}
	var problems []string
	for _, t := range tools {
		t.Source = source
		if !NamePattern.MatchString(t.Name) {
			problems = append(problems, fmt.Sprintf("invalid tool name %q: names must match %s", t.Name, NamePattern))
			continue
		}
		if old, ok := c.tools[t.Name]; ok {
			problems = append(problems, fmt.Sprintf("tool %q from %s collides with the tool of that name from %s", t.Name, source, sourceName(old)))
			continue
		}
		c.tools[t.Name] = t
	}
	err := c.changed()
	if len(problems) > 0 {
		return fmt.Errorf("loading tools of %s: %s", source, strings.Join(problems, "; "))
	}
	return err
}

// Remove removes the named tools, if present.
func (c *Catalog) Remove(names ...string) {
	c.mu.Lock()
	for _, n := range names {
		delete(c.tools, n)
	}
	_ = c.changed()
}

// changed bumps the version, releases the lock and tells the watchers.
func (c *Catalog) changed() error {
	c.version++
	watchers := slices.Clone(c.watchers)
	c.mu.Unlock()
	for _, w := range watchers {
		w()
	}
	return nil
}

// Lookup returns the tool called name.
func (c *Catalog) Lookup(name string) (Tool, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	t, ok := c.tools[name]
	return t, ok
}

// List returns every tool, sorted by name.
func (c *Catalog) List() []Tool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]Tool, 0, len(c.tools))
	for _, t := range c.tools {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Names returns every tool name, sorted.
func (c *Catalog) Names() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	names := make([]string, 0, len(c.tools))
	for n := range c.tools {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Version increases with every change to the catalog.
func (c *Catalog) Version() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.version
}

// OnChange registers f to be called after every change. f runs on the
// goroutine that made the change, without the catalog's lock held.
func (c *Catalog) OnChange(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watchers = append(c.watchers, f)
}

// Filter returns the tools of list for which keep reports true.
func Filter(list []Tool, keep func(Tool) bool) []Tool {
	var out []Tool
	for _, t := range list {
		if keep(t) {
			out = append(out, t)
		}
	}
	return out
}

func sourceName(t Tool) string {
	if t.Source == "" {
		return "an unnamed source"
	}
	return t.Source
}
