package store

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestra-mcp/orchestra/internal/textcut"
	"github.com/orchestra-mcp/orchestra/testutil/pgtest"
)

func TestConversations(t *testing.T) {
	t.Run("file", func(t *testing.T) { conversations(t, tempDB(t)) })
	t.Run("postgres", func(t *testing.T) { conversations(t, pgtest.URL(t)) })
}

// conversations: turns are kept per (owner, tenant, context id), read back
// oldest first within a byte budget (the newest kept), capped in number and
// size, aged out, listed and cleared within a scope.
func conversations(t *testing.T, path string) {
	ctx := t.Context()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := openTest(t, path, Options{Now: func() time.Time { return now }, Retention: Retention{MaxConversationTurns: 3, ConversationMaxAge: time.Hour}})
	alice := ConversationKey{Owner: "static:alice", Tenant: "a", ContextID: "c1"}
	for i, g := range []string{"one", "two", "three", "four"} {
		if err := s.AppendTurn(ctx, alice, Turn{Goal: g, Answer: "answer " + g, ExecID: "e" + g, At: now.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	other := []ConversationKey{{Owner: "static:bob", Tenant: "a", ContextID: "c1"}, {Owner: "static:alice", Tenant: "b", ContextID: "c1"}}
	for _, k := range other {
		if got, err := s.RecentTurns(ctx, k, 0); err != nil || len(got) != 0 {
			t.Errorf("%+v sees %v (%v); want nothing", k, got, err)
		}
	}
	got, err := s.RecentTurns(ctx, alice, 0)
	if err != nil {
		t.Fatal(err)
	}
	var goals []string
	for _, tu := range got {
		goals = append(goals, tu.Goal)
	}
	if strings.Join(goals, ",") != "two,three,four" || got[2].Answer != "answer four" || got[2].ExecID != "efour" {
		t.Errorf("turns %+v; want two, three, four (three kept)", got)
	}
	if got, _ := s.RecentTurns(ctx, alice, len("fouranswer four")+len("three")); len(got) != 1 || got[0].Goal != "four" {
		t.Errorf("within a budget of one turn: %+v", got)
	}
	long := strings.Repeat("é", MaxTurnBytes)
	if err := s.AppendTurn(ctx, other[0], Turn{Goal: long, Answer: "x"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.RecentTurns(ctx, other[0], 0); len(got) != 1 || len(got[0].Goal) > MaxTurnBytes || !strings.HasPrefix(long, strings.TrimSuffix(got[0].Goal, textcut.Marker)) {
		t.Errorf("a long goal is not cut to %d bytes: %d", MaxTurnBytes, len(got[0].Goal))
	}
	list, err := s.Conversations(ctx, OwnerScope("static:alice"), 0)
	if err != nil || len(list) != 1 || list[0].ContextID != "c1" || list[0].Turns != 3 {
		t.Errorf("alice's conversations %+v (%v)", list, err)
	}
	if all, _ := s.Conversations(ctx, Scope{}, 0); len(all) != 2 {
		t.Errorf("every conversation: %+v", all)
	}
	if _, err := s.TurnsIn(ctx, OwnerScope("static:carol"), "c1"); err == nil {
		t.Error("carol read alice's conversation")
	}
	if n, err := s.ClearConversations(ctx, OwnerScope("static:alice"), "c1"); err != nil || n != 3 {
		t.Errorf("clearing alice's c1 deleted %d (%v)", n, err)
	}
	if got, _ := s.RecentTurns(ctx, other[0], 0); len(got) != 1 {
		t.Error("clearing alice's conversation cleared bob's")
	}
	now = now.Add(2 * time.Hour)
	if got, _ := s.RecentTurns(ctx, other[0], 0); len(got) != 0 {
		t.Errorf("a turn older than the retention is still read: %+v", got)
	}
}

func TestIdempotencyKeys(t *testing.T) {
	t.Run("file", func(t *testing.T) { idempotencyKeys(t, tempDB(t)) })
	t.Run("postgres", func(t *testing.T) { idempotencyKeys(t, pgtest.URL(t)) })
}

// idempotencyKeys: of concurrent claims of one key from two stores on one
// database, exactly one wins; the others see its hash, then its result;
// an expired or abandoned claim is free again, a released one at once.
func idempotencyKeys(t *testing.T, path string) {
	ctx := t.Context()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s1 := openTest(t, path, Options{Now: clock})
	s2 := openTest(t, path, Options{Now: clock})
	k := IdempotencyKey{Owner: "static:alice", Key: "k1"}
	var wg sync.WaitGroup
	claims := make([]Claim, 8)
	for i := range claims {
		wg.Go(func() {
			st := s1
			if i%2 == 1 {
				st = s2
			}
			c, err := st.ClaimIdempotencyKey(ctx, k, "h1", time.Hour, time.Minute)
			if err != nil {
				t.Error(err)
			}
			claims[i] = c
		})
	}
	wg.Wait()
	won := 0
	for _, c := range claims {
		if c.Won {
			won++
		} else if c.Hash != "h1" || c.Result != nil {
			t.Errorf("a lost claim sees %+v", c)
		}
	}
	if won != 1 {
		t.Fatalf("%d claims won; want 1", won)
	}
	if c, err := s2.ClaimIdempotencyKey(ctx, IdempotencyKey{Owner: "static:bob", Key: "k1"}, "h2", time.Hour, time.Minute); err != nil || !c.Won {
		t.Errorf("another owner's key is not its own: %+v %v", c, err)
	}
	if err := s1.StartIdempotencyKey(ctx, k, "h1", "e1"); err != nil {
		t.Fatal(err)
	}
	if err := s1.FinishIdempotencyKey(ctx, k, "h1", "e1", []byte(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	if c, err := s2.ClaimIdempotencyKey(ctx, k, "h1", time.Hour, time.Minute); err != nil || c.Won || string(c.Result) != `{"ok":true}` || c.ExecID != "e1" {
		t.Errorf("a repeat after the result: %+v %v", c, err)
	}
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	if c, err := s2.ClaimIdempotencyKey(ctx, k, "h3", time.Hour, time.Minute); err != nil || !c.Won {
		t.Errorf("an expired key is not free: %+v %v", c, err)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	if c, err := s1.ClaimIdempotencyKey(ctx, k, "h4", time.Hour, time.Minute); err != nil || !c.Won {
		t.Errorf("an abandoned claim is not free: %+v %v", c, err)
	}
	if err := s1.ReleaseIdempotencyKey(ctx, k, "h4"); err != nil {
		t.Fatal(err)
	}
	if _, found, err := s2.IdempotencyClaim(ctx, k); err != nil || found {
		t.Errorf("a released key is still held (%v)", err)
	}
}
