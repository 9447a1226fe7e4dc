package planner_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/registry"
)

// failingPlan calls research_blog with arguments its tool fails on.
const failingPlan = `{"type":"tool_calls","reasoning":"research","calls":[
	{"tool_name":"research_blog","arguments":{"topic":"fail please"}}]}`

// TestReflectionOfAFailedRun: with reflection on, a run that failed costs
// one more model call, whose one sentence is kept as a lesson of each tool
// that failed; the lessons of the tool error itself come from LessonsOf.
func TestReflectionOfAFailedRun(t *testing.T) {
	m := llm.NewScripted([]llm.Response{planning(failingPlan), text("Check the topic before researching it.")})
	f := newFixture(t, m, fixtureOpts{})
	mem := &memLessons{}
	research, _ := f.cat.Lookup("research_blog")
	call := research.Call
	research.Call = func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
		if req.Arguments["topic"] == "fail please" {
			return nil, errors.New("the research service refused the topic")
		}
		return call(ctx, req)
	}
	f.cat = registry.NewCatalog(research)
	e := orchestrate.NewEngine(orchestrate.Options{Tools: f.cat})
	p := planner.New(planner.Options{Catalog: f.cat, Engine: e, Model: m, Lessons: mem, Reflection: true})
	env, err := p.Run(t.Context(), &orchestrate.Request{Prompt: "research something"})
	if err != nil {
		t.Fatal(err)
	}
	if env.Artifact.Success || env.Artifact.Planner.ModelCalls != 2 {
		t.Fatalf("status %s, planner %+v", env.Artifact.Status, env.Artifact.Planner)
	}
	if len(mem.lessons) != 1 || mem.lessons[0].Kind != planner.LessonReflection || mem.lessons[0].Tool != "research_blog" ||
		mem.lessons[0].Text != "Check the topic before researching it." {
		t.Errorf("lessons = %+v", mem.lessons)
	}
	reqs := m.Requests()
	if got := userText(reqs[1]); !strings.Contains(got, "the research service refused the topic") || !strings.Contains(got, `"topic":"fail please"`) {
		t.Errorf("the reflection request lacks what failed:\n%s", got)
	}
	lessons := planner.LessonsOf(env)
	if len(lessons) != 1 || lessons[0].Kind != planner.LessonToolError || !strings.Contains(lessons[0].Text, `"topic":"fail please"`) {
		t.Errorf("LessonsOf = %+v", lessons)
	}
}
