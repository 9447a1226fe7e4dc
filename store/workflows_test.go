package store

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/orchestra-mcp/orchestra/testutil/pgtest"
)

func TestWorkflowsVersionsAndScopes(t *testing.T) {
	t.Run("file", func(t *testing.T) { workflowsVersionsAndScopes(t, tempDB(t)) })
	t.Run("postgres", func(t *testing.T) { workflowsVersionsAndScopes(t, pgtest.URL(t)) })
}

func workflowsVersionsAndScopes(t *testing.T, path string) {
	ctx := t.Context()
	s := openTest(t, path, Options{})
	params := json.RawMessage(`{"type":"object","properties":{"dir":{"type":"string"}}}`)
	save := func(owner, tenant, name, plan string) (int, error) {
		return s.SaveWorkflow(ctx, Workflow{Owner: owner, Tenant: tenant, Name: name, Description: "d", Parameters: params, Plan: json.RawMessage(plan)})
	}
	for i, want := range []int{1, 2} {
		v, err := save("alice", "acme", "report", `{"steps":[{"id":"s","tool":"echo","arguments":{"n":`+string(rune('1'+i))+`}}]}`)
		if err != nil || v != want {
			t.Fatalf("save %d = %d, %v; want version %d", i, v, err, want)
		}
	}
	// Names are per owner and tenant: bob's save of alice's name is his
	// own first version, and says nothing of hers.
	if v, err := save("bob", "acme", "report", `{"steps":[]}`); err != nil || v != 1 {
		t.Fatalf("bob saving the name alice keeps = %d, %v; want his version 1", v, err)
	}
	if _, err := s.DeleteWorkflow(ctx, OwnerScope("bob").InTenant("acme"), "report"); err != nil {
		t.Fatal(err)
	}
	// A version given (an import's) is kept when newer than the newest.
	for _, c := range []struct {
		version, want int
		err           error
	}{{5, 5, nil}, {5, 0, ErrWorkflowVersion}, {3, 0, ErrWorkflowVersion}, {0, 6, nil}, {9, 9, nil}} {
		v, err := s.SaveWorkflow(ctx, Workflow{Owner: "carol", Name: "kept", Version: c.version, Parameters: params, Plan: json.RawMessage(`{"steps":[]}`)})
		if v != c.want || !errors.Is(err, c.err) {
			t.Fatalf("saving kept as version %d = %d, %v; want %d, %v", c.version, v, err, c.want, c.err)
		}
	}
	if _, err := s.DeleteWorkflow(ctx, OwnerScope("carol"), "kept"); err != nil {
		t.Fatal(err)
	}
	if _, err := save("bob", "other", "triage", `{"steps":[]}`); err != nil {
		t.Fatal(err)
	}
	alice := OwnerScope("alice").InTenant("acme")
	w, err := s.Workflow(ctx, alice, "report", 0)
	if err != nil || w.Version != 2 || string(w.Plan) != `{"steps":[{"id":"s","tool":"echo","arguments":{"n":2}}]}` || w.CreatedAt.IsZero() {
		t.Fatalf("newest report = %+v, %v", w, err)
	}
	if w, err := s.Workflow(ctx, alice, "report", 1); err != nil || w.Version != 1 {
		t.Fatalf("report v1 = %+v, %v", w, err)
	}
	if _, err := s.Workflow(ctx, OwnerScope("bob").InTenant("other"), "report", 0); !errors.Is(err, ErrWorkflowNotFound) {
		t.Fatalf("bob reads alice's workflow: %v, want ErrWorkflowNotFound", err)
	}
	if _, err := s.Workflow(ctx, OwnerScope("alice").InTenant("other"), "report", 0); !errors.Is(err, ErrWorkflowNotFound) {
		t.Fatalf("alice in another tenant reads it: %v", err)
	}
	list, err := s.Workflows(ctx, alice)
	if err != nil || len(list) != 1 || list[0].Name != "report" || list[0].Version != 2 {
		t.Fatalf("alice's workflows = %+v, %v", list, err)
	}
	all, err := s.Workflows(ctx, Scope{})
	if err != nil || len(all) != 2 || all[0].Name != "report" || all[1].Name != "triage" {
		t.Fatalf("every workflow = %+v, %v", all, err)
	}
	vs, err := s.WorkflowVersions(ctx, alice, "report")
	if err != nil || len(vs) != 2 || vs[0].Version != 2 || vs[1].Version != 1 {
		t.Fatalf("versions = %+v, %v", vs, err)
	}
	if _, err := s.DeleteWorkflow(ctx, OwnerScope("bob").InTenant("other"), "report"); !errors.Is(err, ErrWorkflowNotFound) {
		t.Fatalf("bob deleting alice's workflow: %v", err)
	}
	if n, err := s.DeleteWorkflow(ctx, alice, "report"); err != nil || n != 2 {
		t.Fatalf("delete = %d, %v", n, err)
	}
	if _, err := s.Workflow(ctx, alice, "report", 0); !errors.Is(err, ErrWorkflowNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	// A deleted name is free again, and starts from version 1.
	if v, err := save("bob", "acme", "report", `{"steps":[]}`); err != nil || v != 1 {
		t.Fatalf("bob saving the freed name = %d, %v", v, err)
	}
}
