package budget

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestNestingDivides: what a child spends counts against every node above
// it, so that the children of a node together never spend more than it
// may, however many there are and however deeply they nest.
func TestNestingDivides(t *testing.T) {
	req := New("the request", Grant{ToolCalls: Cap{Max: 10, Key: "limits.max_tool_calls"}})
	var spent int
	// Three levels of children, each with a cap of its own as large as
	// the request's: nesting must not multiply it.
	for range 4 {
		run := req.Child("the run", Grant{ToolCalls: Cap{Max: 10}})
		for range 4 {
			agent := run.Child("agent a", Grant{ToolCalls: Cap{Max: 10}})
			for range 4 {
				if agent.Spend(ToolCalls, 1) == nil {
					spent++
				}
			}
		}
	}
	if spent != 10 || req.Used(ToolCalls) != 10 {
		t.Fatalf("the children spent %d (the request counts %d); the request allows 10", spent, req.Used(ToolCalls))
	}
	if left := req.Left(ToolCalls); left != 0 {
		t.Errorf("left %d", left)
	}
}

// TestExceededNamesTheNode: a refused spend counts nothing anywhere and
// names the node and the key whose cap refused it.
func TestExceededNamesTheNode(t *testing.T) {
	req := New("the request", Grant{ModelCalls: Cap{Max: 3, Key: "limits.max_model_calls"}})
	run := req.Child("the run", Grant{ModelCalls: Cap{Max: 5}})
	if err := run.Spend(ModelCalls, 2); err != nil {
		t.Fatal(err)
	}
	err := run.Spend(ModelCalls, 2)
	var ex *Exceeded
	if !errors.As(err, &ex) || ex.Node != req || ex.Kind != ModelCalls || ex.Used != 2 || ex.Want != 2 {
		t.Fatalf("error %#v", err)
	}
	if msg := err.Error(); msg != "the request reached its limit of 3 model calls (limits.max_model_calls)" {
		t.Errorf("message %q", msg)
	}
	if run.Used(ModelCalls) != 2 || req.Used(ModelCalls) != 2 {
		t.Errorf("a refused spend was counted: run %d, request %d", run.Used(ModelCalls), req.Used(ModelCalls))
	}
	bytes := New("the server", Grant{Bytes: Cap{Max: 4 << 20, Key: "limits.max_memory_bytes"}})
	if err := bytes.Spend(Bytes, 5<<20); err == nil || !strings.Contains(err.Error(), "4 MiB held (limits.max_memory_bytes)") {
		t.Errorf("bytes error %v", err)
	}
}

// TestBytesAreHeldAndReleased: bytes count until they are released, at
// every node; Hold counts past a cap (what exists already), and later
// spends see it.
func TestBytesAreHeldAndReleased(t *testing.T) {
	server := New("the server", Grant{Bytes: Cap{Max: 100}})
	a := server.Child("request a", Grant{})
	b := server.Child("request b", Grant{})
	if err := a.Spend(Bytes, 60); err != nil {
		t.Fatal(err)
	}
	if err := b.Spend(Bytes, 60); err == nil {
		t.Fatal("two requests held more than the server may")
	}
	a.Release(Bytes, 60)
	if err := b.Spend(Bytes, 60); err != nil {
		t.Fatalf("released bytes were not given back: %v", err)
	}
	a.Hold(Bytes, 50)
	if server.Used(Bytes) != 110 {
		t.Errorf("server holds %d", server.Used(Bytes))
	}
	if err := a.Spend(Bytes, 1); err == nil {
		t.Error("a spend past what is held was allowed")
	}
}

// TestDeadlineOnlyShrinks: a child's deadline is never later than its
// parent's; Within bounds a timeout by it.
func TestDeadlineOnlyShrinks(t *testing.T) {
	now := time.Now()
	req := New("the request", Grant{Deadline: now.Add(time.Minute)})
	late := req.Child("the run", Grant{Deadline: now.Add(time.Hour)})
	if dl, _ := late.Deadline(); !dl.Equal(now.Add(time.Minute)) {
		t.Errorf("a child's deadline %v is past its parent's", dl)
	}
	early := req.Child("the run", Grant{Deadline: now.Add(time.Second)})
	if dl, _ := early.Deadline(); !dl.Equal(now.Add(time.Second)) {
		t.Errorf("a child's own earlier deadline was lost: %v", dl)
	}
	if d := late.Within(time.Hour); d > time.Minute {
		t.Errorf("Within gave %v past the deadline", d)
	}
	var none *Budget
	if d := none.Within(time.Hour); d != time.Hour {
		t.Errorf("no budget bounded a timeout to %v", d)
	}
}

// TestCapabilitiesOnlyNarrow: a node can call only what every node above
// it allows; a principal (an agent) acts with its own tools, within its
// request's; what runs under a principal can call no more than it.
func TestCapabilitiesOnlyNarrow(t *testing.T) {
	only := func(names ...string) func(string) bool {
		return func(n string) bool {
			for _, m := range names {
				if m == n {
					return true
				}
			}
			return false
		}
	}
	tenant := New("the request", Grant{Root: true, Tools: only("json_query", "agent_orchestrate", "agent__reader", "read", "secret")})
	caller := tenant.Child("agent boss", Grant{Principal: true, Tools: only("json_query", "agent_orchestrate", "agent__reader")})
	nested := caller.Child("the run", Grant{}) // boss's nested plan
	for name, want := range map[string]bool{"json_query": true, "agent__reader": true, "read": false, "secret": false, "write": false} {
		if got := nested.Allows(name); got != want {
			t.Errorf("boss's nested plan: Allows(%q) = %v, want %v", name, got, want)
		}
	}
	// reader, which boss may call, reads with its own tools, within the
	// tenant's: write is its own but not the tenant's.
	reader := nested.Child("agent reader", Grant{Principal: true, Tools: only("read", "write")})
	for name, want := range map[string]bool{"read": true, "write": false, "json_query": false, "secret": false} {
		if got := reader.Allows(name); got != want {
			t.Errorf("reader: Allows(%q) = %v, want %v", name, got, want)
		}
	}
	under := reader.Child("the run", Grant{Tools: only("read", "secret")})
	if under.Allows("secret") || !under.Allows("read") {
		t.Error("a node under reader widened its tools")
	}
	if !tenant.Narrowed() || !under.Narrowed() || New("x", Grant{}).Narrowed() {
		t.Error("Narrowed")
	}
	var none *Budget
	if !none.Allows("anything") {
		t.Error("a nil budget refused a tool")
	}
}

// TestNoCap: kinds without a cap count but never refuse; Left is
// unbounded; Limit finds the cap with the least room.
func TestNoCap(t *testing.T) {
	req := New("the request", Grant{ToolCalls: Cap{Max: 10, Key: "a"}})
	run := req.Child("the run", Grant{ToolCalls: Cap{Max: 20, Key: "b"}})
	if err := run.Spend(AgentRuns, 1000); err != nil {
		t.Fatal(err)
	}
	if left := run.Left(AgentRuns); left != math.MaxInt64 {
		t.Errorf("left %d", left)
	}
	if c, ok := run.Limit(ToolCalls); !ok || c.Key != "a" {
		t.Errorf("limit %+v %v", c, ok)
	}
	if _, ok := run.Limit(Bytes); ok {
		t.Error("a limit without a cap")
	}
}

// TestConcurrentSpends: spends racing on one request never pass its cap
// (run with -race).
func TestConcurrentSpends(t *testing.T) {
	req := New("the request", Grant{ToolCalls: Cap{Max: 500}})
	var wg sync.WaitGroup
	var mu sync.Mutex
	spent := 0
	for range 16 {
		child := req.Child("the run", Grant{})
		wg.Go(func() {
			for range 100 {
				if child.Spend(ToolCalls, 1) == nil {
					mu.Lock()
					spent++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if spent != 500 || req.Used(ToolCalls) != 500 {
		t.Errorf("spent %d, counted %d; the cap is 500", spent, req.Used(ToolCalls))
	}
}

// BenchmarkStepSpend is what the tree costs a tool step: one tool call
// and one byte charge, released, on a run under a request under the
// server.
func BenchmarkStepSpend(b *testing.B) {
	server := New("the server", Grant{Bytes: Cap{Max: 1 << 30}})
	req := server.Child("the request", Grant{Root: true, ToolCalls: Cap{Max: math.MaxInt64}, Bytes: Cap{Max: 64 << 20}})
	run := req.Child("the run", Grant{Deadline: time.Now().Add(time.Hour)})
	b.ReportAllocs()
	for b.Loop() {
		if err := run.Spend(ToolCalls, 1); err != nil {
			b.Fatal(err)
		}
		if err := run.Spend(Bytes, 1000); err != nil {
			b.Fatal(err)
		}
		run.Release(Bytes, 1000)
	}
}
