package orchestrate

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/orchestra-mcp/orchestra/registry"
)

func TestSmoke(t *testing.T) {
	log := &callLog{}
	cat := registry.NewCatalog(
		fakeTool(t, "research", `{"type":"object","properties":{"topic":{"type":"string"}},"required":["topic"]}`,
			`{"type":"object","properties":{"title":{"type":"string"},"count":{"type":"integer"},"sources":{"type":"array","items":{"type":"object","properties":{"url":{"type":"string"}}}}}}`,
			func(ctx context.Context, args map[string]any) (*registry.Result, error) {
				log.add("research", args)
				return structured(map[string]any{"title": "T " + args["topic"].(string), "count": 2.0, "sources": []any{map[string]any{"url": "http://a"}}}), nil
			}),
		fakeTool(t, "write", `{"type":"object","properties":{"text":{"type":"string"},"n":{"type":"integer"}},"additionalProperties":false}`,
			`{"type":"object","properties":{"ok":{"type":"boolean"}}}`,
			func(ctx context.Context, args map[string]any) (*registry.Result, error) {
				log.add("write", args)
				return structured(map[string]any{"ok": true}), nil
			}),
	)
	e := NewEngine(Options{Tools: cat})
	req := mustRequest(t, `{"plan":{"steps":[
		{"id":"r","tool":"research","arguments":{"topic":"go"}},
		{"id":"g","parallel":[
			{"tool":"write","arguments":{"text":"${r.output.title} has ${0.output.count}","n":"$r.output.count"}},
			{"id":"w2","tool":"write","arguments":{"text":"$r.output.sources[0].url"}}
		]},
		{"tool":"write","arguments":{"text":"${g.output.w2.ok}"}}
	]}}`)
	env := e.Run(context.Background(), req)
	data, _ := json.MarshalIndent(env, "", "  ")
	t.Logf("%s", data)
	t.Logf("%s", env.Summary())
}
