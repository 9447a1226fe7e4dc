package fairshare

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// take acquires n slots for c, each within a second of fake time, and
// returns their releases and the error of the first that got none.
func take(t *testing.T, p *Pool, c Claim, n int) ([]func(), error) {
	t.Helper()
	var rel []func()
	for range n {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		r, err := p.Acquire(ctx, c)
		cancel()
		if err != nil {
			return rel, err
		}
		rel = append(rel, r)
	}
	return rel, nil
}

// TestOwnerCannotHoldEverySlot: one owner alone holds at most all the
// slots but its share; the rest stay for the others, who each get their
// share at once.
func TestOwnerCannotHoldEverySlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{Slots: 8, OwnerShare: 2, TenantShare: 4})
		a := Claim{Owner: "user:a"}
		got, err := take(t, p, a, 7)
		var busy *BusyError
		if len(got) != 6 || !errors.As(err, &busy) || !strings.Contains(busy.Reason, "limits.plans_per_owner") || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("owner a took %d of 8 slots, then %v; want 6, then busy naming limits.plans_per_owner", len(got), err)
		}
		if _, err := take(t, p, Claim{Owner: "user:b"}, 2); err != nil {
			t.Fatalf("owner b got no slot while a held 6 of 8: %v", err)
		}
		if _, err := take(t, p, Claim{Owner: "user:c"}, 1); err == nil || !strings.Contains(err.Error(), "limits.max_concurrent_plans") {
			t.Fatalf("a ninth slot: %v", err)
		}
		if all, byA, _ := p.Held("user:a", ""); all != 8 || byA != 6 {
			t.Errorf("held %d, a %d", all, byA)
		}
		for _, r := range got {
			r()
			r() // once only
		}
		if all, byA, _ := p.Held("user:a", ""); all != 2 || byA != 0 {
			t.Errorf("after a released: held %d, a %d", all, byA)
		}
	})
}

// TestFairQueue: a freed slot goes to the waiting owner that holds the
// fewest, whatever the order they came in; among equals, the first.
func TestFairQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{Slots: 4, OwnerShare: 1, TenantShare: 2})
		heavy, _ := take(t, p, Claim{Owner: "heavy"}, 3)
		light, _ := take(t, p, Claim{Owner: "light"}, 1)
		order := make(chan string, 3)
		wait := func(owner string) {
			go func() {
				r, err := p.Acquire(t.Context(), Claim{Owner: owner})
				if err != nil {
					return // still waiting as the test ends
				}
				order <- owner
				defer r()
				<-t.Context().Done()
			}()
			synctest.Wait() // queued in this order
		}
		wait("heavy") // holds 3, came first
		wait("new1")  // holds none
		wait("new2")  // holds none, came later
		light[0]()
		synctest.Wait() // served, and said so, before the next slot frees
		heavy[0]()
		synctest.Wait()
		if got := []string{<-order, <-order}; got[0] != "new1" || got[1] != "new2" {
			t.Errorf("served %v; want the owners holding none first, in their order", got)
		}
		select {
		case o := <-order:
			t.Errorf("%s was served past its share with no slot to spare", o)
		default:
		}

		// Two waiters that may both take the next slot: the one holding
		// fewer gets it, though it came later.
		q := New(Options{Slots: 3, OwnerShare: 2})
		take(t, q, Claim{Owner: "x"}, 1)
		z, _ := take(t, q, Claim{Owner: "z"}, 2)
		served := make(chan string, 2)
		for _, owner := range []string{"x", "y"} {
			go func() {
				r, err := q.Acquire(t.Context(), Claim{Owner: owner})
				if err == nil {
					served <- owner
					defer r()
				}
				<-t.Context().Done()
			}()
			synctest.Wait()
		}
		z[0]()
		synctest.Wait()
		z[1]()
		if got := []string{<-served, <-served}; got[0] != "y" || got[1] != "x" {
			t.Errorf("served %v; want y (holding none) before x (holding one), though x came first", got)
		}
	})
}

// TestTenantShare: a tenant's owners together hold their tenant's share,
// more only while the others' reserve stays free, never past its own
// cap; an owner of no tenant still gets its share.
func TestTenantShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{Slots: 8, OwnerShare: 2, TenantShare: 4})
		held := 0
		var last error
		for _, owner := range []string{"a1", "a2", "a3", "a4"} {
			got, err := take(t, p, Claim{Owner: owner, Tenant: "acme"}, 2)
			held += len(got)
			if err != nil {
				last = err
			}
		}
		if held != 6 || last == nil || !strings.Contains(last.Error(), "limits.plans_per_tenant") {
			t.Fatalf("tenant acme's owners held %d of 8, last refusal %v; want 6, refused naming limits.plans_per_tenant", held, last)
		}
		if _, err := take(t, p, Claim{Owner: "solo"}, 2); err != nil {
			t.Fatalf("an owner of no tenant got no slot: %v", err)
		}

		q := New(Options{Slots: 8, OwnerShare: 2, TenantShare: 4})
		capped := Claim{Owner: "b1", Tenant: "small", TenantMax: 1}
		if _, err := take(t, q, capped, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := take(t, q, Claim{Owner: "b2", Tenant: "small", TenantMax: 1}, 1); err == nil || !strings.Contains(err.Error(), "tenants.small.limits.max_concurrent_plans") {
			t.Errorf("past the tenant's own cap: %v", err)
		}
	})
}

// TestCancelledWaiterLeaves: a claim whose context ends leaves the queue
// and holds nothing.
func TestCancelledWaiterLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{Slots: 1})
		first, _ := take(t, p, Claim{Owner: "a"}, 1)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() {
			_, err := p.Acquire(ctx, Claim{Owner: "b"})
			done <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err)
		}
		first[0]()
		if all, _, b := p.Held("b", ""); all != 0 || b != 0 || len(p.waiting) != 0 {
			t.Errorf("held %d, waiting %d", all, len(p.waiting))
		}
	})
}

// TestUnlimited: a pool of no slots limits nothing but a tenant's cap.
func TestUnlimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{})
		if got, err := take(t, p, Claim{Owner: "a"}, 100); err != nil || len(got) != 100 {
			t.Fatalf("%d, %v", len(got), err)
		}
	})
}
