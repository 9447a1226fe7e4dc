package budget

import (
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/orchestra-mcp/orchestra/internal/bytesize"
)

// Kind is what a budget counts.
type Kind uint8

// The kinds of a budget.
const (
	// ToolCalls counts the calls of catalog tools: plan steps, loop
	// iterations, an agent's and the reactive fallback's calls.
	ToolCalls Kind = iota
	// ModelCalls counts the calls of a model: planning, agents' turns,
	// the reactive fallback's turns, answers written after a run.
	ModelCalls
	// AgentRuns counts the runs of agents.
	AgentRuns
	// Bytes counts what is held while work runs: step outputs and
	// arguments, records, responses. It is given back (Release) when
	// what holds it ends.
	Bytes

	kinds = iota
)

// String names the kind as messages say it.
func (k Kind) String() string {
	switch k {
	case ToolCalls:
		return "tool calls"
	case ModelCalls:
		return "model calls"
	case AgentRuns:
		return "agent runs"
	case Bytes:
		return "bytes"
	}
	return "kind " + strconv.Itoa(int(k))
}

// Cap is one limit of a node: at most Max of its kind (0 or less: no cap
// of its own), configured under Key ("limits.max_tool_calls"), which
// messages name so that the reader knows what to raise.
type Cap struct {
	Max int64
	Key string
}

// Grant is what a node of the tree is given: caps on what it and
// everything under it may spend, a deadline, and the tools it may call.
// Its zero value adds nothing to what its parent has.
type Grant struct {
	ToolCalls  Cap
	ModelCalls Cap
	AgentRuns  Cap
	Bytes      Cap
	// Deadline, when set, is when the node's work must have ended; a
	// child's is never later than its parent's.
	Deadline time.Time
	// Tools, when set, reports the tools the node may call; a child may
	// call a tool only when it and every node above it allow it (but see
	// Principal).
	Tools func(name string) bool
	// Root marks a request's root: the tools it allows bound every
	// principal under it.
	Root bool
	// Principal marks a node that acts with its own tools rather than its
	// caller's: an agent, which the configuration gives its tools, may
	// call them although the plan or agent that called it may not (being
	// allowed to call the agent is what lets its caller use them). It
	// stays within the tools of the request it runs for (the nearest
	// Root above it) and everything above that. A node that is no
	// principal, such as a nested plan, can call only what its caller
	// could.
	Principal bool
}

func (g *Grant) caps() [kinds]Cap {
	return [kinds]Cap{ToolCalls: g.ToolCalls, ModelCalls: g.ModelCalls, AgentRuns: g.AgentRuns, Bytes: g.Bytes}
}

// Budget is one node of a budget tree. It is safe for concurrent use; a
// nil *Budget has no caps, no deadline and allows every tool.
type Budget struct {
	parent   *Budget
	name     string
	caps     [kinds]Cap
	used     [kinds]atomic.Int64
	deadline time.Time // the earliest of the path's
	tools    func(string) bool
	narrowed bool    // some node of the path has tools
	root     bool    // Grant.Root
	up       *Budget // the next node whose tools bound this one's: the parent, or a principal's request
}

// New returns the root of a tree, named for messages ("the server").
func New(name string, g Grant) *Budget {
	return &Budget{name: name, caps: g.caps(), deadline: g.Deadline, tools: g.Tools, narrowed: g.Tools != nil, root: g.Root}
}

// Child returns a node under b that draws from it: what the child spends
// counts against b and everything above it too. On a nil b it is New.
func (b *Budget) Child(name string, g Grant) *Budget {
	if b == nil {
		return New(name, g)
	}
	c := New(name, g)
	c.parent, c.up = b, b
	if g.Principal {
		c.up = b.request()
	}
	c.narrowed = c.narrowed || c.up.Narrowed()
	if !b.deadline.IsZero() && (c.deadline.IsZero() || b.deadline.Before(c.deadline)) {
		c.deadline = b.deadline
	}
	return c
}

// Name returns the node's name.
func (b *Budget) Name() string {
	if b == nil {
		return ""
	}
	return b.name
}

// Exceeded is the error of a spend that a node's cap refused.
type Exceeded struct {
	// Node is the node whose cap was reached, and Name its name.
	Node *Budget
	Name string
	Kind Kind
	Cap  Cap
	// Used is what the node had spent before the refused spend, and Want
	// what the spend asked for.
	Used, Want int64
}

func (e *Exceeded) Error() string {
	what := strconv.FormatInt(e.Cap.Max, 10) + " " + e.Kind.String()
	if e.Kind == Bytes {
		what = bytesize.Format(e.Cap.Max) + " held"
	}
	msg := fmt.Sprintf("%s reached its limit of %s", e.Name, what)
	if e.Cap.Key != "" {
		msg += " (" + e.Cap.Key + ")"
	}
	return msg
}

// Spend counts n of kind k against b and every node above it, or, when
// that would pass one of their caps, counts nothing and returns an
// *Exceeded naming the first node (from b up) whose cap refused it.
func (b *Budget) Spend(k Kind, n int64) error {
	for node := b; node != nil; node = node.parent {
		if err := node.take(k, n); err != nil {
			for back := b; back != node; back = back.parent {
				back.used[k].Add(-n)
			}
			return err
		}
	}
	return nil
}

// take counts n on this node alone, within its cap.
func (b *Budget) take(k Kind, n int64) error {
	c := b.caps[k]
	if c.Max <= 0 {
		b.used[k].Add(n)
		return nil
	}
	for {
		used := b.used[k].Load()
		if used+n > c.Max {
			return &Exceeded{Node: b, Name: b.name, Kind: k, Cap: c, Used: used, Want: n}
		}
		if b.used[k].CompareAndSwap(used, used+n) {
			return nil
		}
	}
}

// Hold counts n of kind k against b and every node above it without
// checking their caps: for what is held already and cannot be refused,
// such as a response being sent. Later spends see it. Release gives it
// back.
func (b *Budget) Hold(k Kind, n int64) {
	for node := b; node != nil; node = node.parent {
		node.used[k].Add(n)
	}
}

// Release gives back n of kind k (bytes no longer held) to b and every
// node above it.
func (b *Budget) Release(k Kind, n int64) {
	for node := b; node != nil; node = node.parent {
		node.used[k].Add(-n)
	}
}

// Used returns what b and the nodes under it have spent of kind k.
func (b *Budget) Used(k Kind) int64 {
	if b == nil {
		return 0
	}
	return b.used[k].Load()
}

// Left returns how much of kind k b may still spend: the least room of
// the caps on its path, or math.MaxInt64 when none is capped.
func (b *Budget) Left(k Kind) int64 {
	left := int64(math.MaxInt64)
	for node := b; node != nil; node = node.parent {
		if c := node.caps[k]; c.Max > 0 {
			left = min(left, max(c.Max-node.used[k].Load(), 0))
		}
	}
	return left
}

// Limit returns the cap of kind k that binds b, the one with the least
// room on its path, and whether any does.
func (b *Budget) Limit(k Kind) (Cap, bool) {
	var (
		best  Cap
		found bool
		room  int64 = math.MaxInt64
	)
	for node := b; node != nil; node = node.parent {
		if c := node.caps[k]; c.Max > 0 {
			if r := c.Max - node.used[k].Load(); !found || r < room {
				best, room, found = c, r, true
			}
		}
	}
	return best, found
}

// Deadline returns when b's work must have ended, the earliest deadline
// of its path, and whether it has one.
func (b *Budget) Deadline() (time.Time, bool) {
	if b == nil || b.deadline.IsZero() {
		return time.Time{}, false
	}
	return b.deadline, true
}

// Within returns d, or what is left until b's deadline when that is
// sooner (never less than a millisecond, so that a timer made from it
// fires rather than never).
func (b *Budget) Within(d time.Duration) time.Duration {
	if dl, ok := b.Deadline(); ok {
		d = min(d, max(time.Until(dl), time.Millisecond))
	}
	return d
}

// Allows reports whether b may call the tool name: every node that
// bounds it (its path, or for a principal its own node and its request's
// path) whose grant names tools allows it.
func (b *Budget) Allows(name string) bool {
	if b == nil || !b.narrowed {
		return true
	}
	for node := b; node != nil; node = node.up {
		if node.tools != nil && !node.tools(name) {
			return false
		}
	}
	return true
}

// request returns the root of the request b belongs to: the nearest node,
// from b up, marked Root; nil when there is none.
func (b *Budget) request() *Budget {
	for node := b; node != nil; node = node.parent {
		if node.root {
			return node
		}
	}
	return nil
}

// Narrowed reports whether some node that bounds b limits the tools it
// may call.
func (b *Budget) Narrowed() bool { return b != nil && b.narrowed }
