package config

import (
	"os"
	"strings"
	"testing"
)

func TestPlannerBlock(t *testing.T) {
	c, err := Parse([]byte("planner:\n  provider: openai\n  model: m\n  base_url: http://127.0.0.1:1/v1\n  fallback: reactive\n  context_tokens: 500\n  insights: 0\n  reflection: true\n"), os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	fallback, tokens, insights, reflection := c.Planner.PlannerOptions()
	if c.Planner.Model != "m" || fallback != "reactive" || tokens != 500 || insights != -1 || !reflection {
		t.Errorf("planner %+v: options %q %d %d %v", c.Planner, fallback, tokens, insights, reflection)
	}
	c, err = Parse([]byte("planner:\n  provider: openai\n  model: m\n"), os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, insights, _ := c.Planner.PlannerOptions(); insights != 0 {
		t.Errorf("insights without the key = %d, want 0 (the planner's default)", insights)
	}
	if got := c.Planner.StreamPolicy(); got != "" {
		t.Errorf("stream without the key = %q, want the planner's default", got)
	}
	c, err = Parse([]byte("planner:\n  provider: openai\n  model: m\n  stream: all\n"), os.LookupEnv)
	if err != nil || c.Planner.StreamPolicy() != "all" {
		t.Errorf("stream: all: %v, %q", err, c.Planner.StreamPolicy())
	}
	for doc, want := range map[string]string{
		"planner:\n  provider: openai\n  model: m\n  fallback: loop\n":     "planner.fallback",
		"planner:\n  provider: openai\n  model: m\n  context_tokens: -1\n": "planner.context_tokens",
		"planner:\n  provider: openai\n  model: m\n  insights: -2\n":       "planner.insights",
		"planner:\n  provider: openai\n  model: m\n  reflections: true\n":  "reflection",
		"planner:\n  provider: openai\n  model: m\n  stream: yes\n":        "planner.stream",
	} {
		if _, err := Parse([]byte(doc), os.LookupEnv); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want one about %s", doc, err, want)
		}
	}
}
