package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// The catalogs golden files name. Every tool is deterministic: its output
// depends only on its arguments, on how often it was called (flaky) and on
// the (fake, inside synctest) clock.
var testCatalogs = map[string]func(t testing.TB) *registry.Catalog{
	"default": defaultCatalog,
	"blog":    blogCatalog,
}

func argInt(args map[string]any, name string, def int) int {
	if f, ok := args[name].(float64); ok {
		return int(f)
	}
	return def
}

func argString(args map[string]any, name, def string) string {
	if s, ok := args[name].(string); ok {
		return s
	}
	return def
}

// sleepCtx waits d of (fake) time or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

const researchIn = `{"type":"object","properties":{
	"topic":{"type":"string"},
	"depth":{"type":"integer","minimum":1},
	"tags":{"type":"array","items":{"type":"string"}},
	"mode":{"enum":["fast","deep"]}
},"required":["topic"],"additionalProperties":false}`

const researchOut = `{"type":"object","properties":{
	"title":{"type":"string"},
	"count":{"type":"integer"},
	"score":{"type":"number"},
	"sources":{"type":"array","items":{"type":"object","properties":{"url":{"type":"string"},"rank":{"type":"integer"}}}},
	"meta":{"$ref":"#/$defs/meta"},
	"pair":{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false},
	"note":{"type":["null","string"]},
	"labels":{"type":"object","additionalProperties":{"type":"object","properties":{"color":{"type":"string"}}}},
	"extra":{}
},"$defs":{"meta":{"type":"object","properties":{"author":{"type":"string"},"year":{"type":"integer"}},"additionalProperties":false}}}`

const writeIn = `{"type":"object","properties":{
	"text":{"type":"string"},
	"n":{"type":"integer"},
	"flag":{"type":"boolean"},
	"ratio":{"type":"number"},
	"items":{"type":"array","items":{"type":"string"}},
	"opts":{"type":"object","properties":{"format":{"enum":["md","html"]},"width":{"type":"integer"}},"required":["format"],"additionalProperties":false},
	"any":{}
},"required":["text"],"additionalProperties":false}`

func defaultCatalog(t testing.TB) *registry.Catalog {
	var mu sync.Mutex
	flakyCalls := map[string]int{}
	tools := []registry.Tool{
		fakeTool(t, "research", researchIn, researchOut, func(ctx context.Context, args map[string]any) (*registry.Result, error) {
			topic := argString(args, "topic", "")
			return structured(map[string]any{
				"title":   "About " + topic,
				"count":   2.0,
				"score":   0.5,
				"sources": []any{map[string]any{"url": "https://a.example/" + topic, "rank": 1.0}, map[string]any{"url": "https://b.example", "rank": 2.0}},
				"meta":    map[string]any{"author": "ann", "year": 2025.0},
				"pair":    []any{"x", 7.0},
				"note":    nil,
				"labels":  map[string]any{"hot": map[string]any{"color": "red"}},
			}), nil
		}),
		fakeTool(t, "write", writeIn, `{"type":"object","properties":{"ok":{"type":"boolean"},"id":{"type":"string"},"len":{"type":"integer"}}}`,
			func(ctx context.Context, args map[string]any) (*registry.Result, error) {
				text := argString(args, "text", "")
				return structured(map[string]any{"ok": true, "id": "doc-" + text, "len": float64(len(text))}), nil
			}),
		// echo returns its arguments; it declares no output schema.
		fakeTool(t, "echo", "", "", func(ctx context.Context, args map[string]any) (*registry.Result, error) {
			if args == nil {
				args = map[string]any{}
			}
			return structured(args), nil
		}),
		// text returns text content only.
		fakeTool(t, "text", `{"type":"object","properties":{"text":{"type":"string"}}}`, "", func(ctx context.Context, args map[string]any) (*registry.Result, error) {
			return registry.TextResult(argString(args, "text", "hello")), nil
		}),
		// fail reports a tool error the model can act on.
		fakeTool(t, "fail", `{"type":"object","properties":{"message":{"type":"string"}}}`, `{"type":"object","properties":{"never":{"type":"string"}}}`,
			func(ctx context.Context, args map[string]any) (*registry.Result, error) {
				return registry.ErrorResult(argString(args, "message", "it failed")), nil
			}),
		// broken fails with a Go error that is not transient.
		fakeTool(t, "broken", "", `{"type":"object"}`, func(ctx context.Context, args map[string]any) (*registry.Result, error) {
			return nil, errors.New("connection refused by design")
		}),
		// flaky fails transiently fail_times times per key, then succeeds.
		fakeTool(t, "flaky", `{"type":"object","properties":{"key":{"type":"string"},"fail_times":{"type":"integer"}}}`,
			`{"type":"object","properties":{"attempt":{"type":"integer"}}}`,
			func(ctx context.Context, args map[string]any) (*registry.Result, error) {
				mu.Lock()
				key := argString(args, "key", "")
				flakyCalls[key]++
				n := flakyCalls[key]
				mu.Unlock()
				if n <= argInt(args, "fail_times", 1) {
					return nil, registry.Transient(fmt.Errorf("transient failure %d", n))
				}
				return structured(map[string]any{"attempt": float64(n)}), nil
			}),
		// slow waits ms of (fake) time, honouring cancellation.
		fakeTool(t, "slow", `{"type":"object","properties":{"ms":{"type":"integer"},"value":{}}}`,
			`{"type":"object","properties":{"slept":{"type":"integer"},"value":{}}}`,
			func(ctx context.Context, args map[string]any) (*registry.Result, error) {
				ms := argInt(args, "ms", 10)
				if err := sleepCtx(ctx, time.Duration(ms)*time.Millisecond); err != nil {
					return nil, err
				}
				return structured(map[string]any{"slept": float64(ms), "value": args["value"]}), nil
			}),
		// slowfail waits ms, then reports a tool error.
		fakeTool(t, "slowfail", `{"type":"object","properties":{"ms":{"type":"integer"}}}`, `{"type":"object"}`,
			func(ctx context.Context, args map[string]any) (*registry.Result, error) {
				if err := sleepCtx(ctx, time.Duration(argInt(args, "ms", 10))*time.Millisecond); err != nil {
					return nil, err
				}
				return registry.ErrorResult("failed after waiting"), nil
			}),
		// hang blocks until its context ends.
		fakeTool(t, "hang", "", `{"type":"object"}`, func(ctx context.Context, args map[string]any) (*registry.Result, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}),
		// boom panics, after ms of (fake) time if given.
		fakeTool(t, "boom", `{"type":"object","properties":{"ms":{"type":"integer"}}}`, `{"type":"object"}`, func(ctx context.Context, args map[string]any) (*registry.Result, error) {
			time.Sleep(time.Duration(argInt(args, "ms", 0)) * time.Millisecond)
			panic("kaboom")
		}),
		// artifact returns a downstream artifact envelope.
		fakeTool(t, "artifact", `{"type":"object","properties":{"skill":{"type":"string"},"top":{"type":"boolean"}}}`, "",
			func(ctx context.Context, args map[string]any) (*registry.Result, error) {
				env := map[string]any{
					"artifact_id": "a-1",
					"artifact":    map[string]any{"content": "x"},
					"_metadata":   map[string]any{"skill_id": argString(args, "skill", "meta_skill")},
				}
				if args["top"] == true {
					env["skill_id"] = "top_skill"
				}
				return structured(env), nil
			}),
		// big returns an output of size bytes.
		fakeTool(t, "big", `{"type":"object","properties":{"size":{"type":"integer"}}}`, `{"type":"object","properties":{"data":{"type":"string"}}}`,
			func(ctx context.Context, args map[string]any) (*registry.Result, error) {
				return structured(map[string]any{"data": strings.Repeat("x", argInt(args, "size", 100))}), nil
			}),
		// depth reports the orchestration depth it runs at.
		fakeTool(t, "depth", "", `{"type":"object","properties":{"depth":{"type":"integer"}}}`,
			func(ctx context.Context, args map[string]any) (*registry.Result, error) {
				return structured(map[string]any{"depth": float64(toolcontext.Depth(ctx))}), nil
			}),
		// Tools whose output schemas exercise the schema walker.
		fakeTool(t, "defs07", "", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
			"properties":{"user":{"$ref":"#/definitions/user"}},
			"definitions":{"user":{"type":"object","properties":{"name":{"type":"string"},"friends":{"type":"array","items":{"$ref":"#/definitions/user"}}}}}}`,
			func(ctx context.Context, args map[string]any) (*registry.Result, error) {
				return structured(map[string]any{"user": map[string]any{"name": "ann", "friends": []any{map[string]any{"name": "bob"}}}}), nil
			}),
		fakeTool(t, "union", "", `{"type":"object",
			"allOf":[{"properties":{"id":{"type":"string"}}},{"properties":{"size":{"type":"integer"}}}],
			"properties":{
				"shape":{"oneOf":[
					{"type":"object","properties":{"kind":{"const":"circle"},"radius":{"type":"number"}}},
					{"type":"object","properties":{"kind":{"const":"square"},"side":{"type":"number"}}}]},
				"value":{"anyOf":[{"type":"string"},{"type":"integer"}]}
			}}`,
			func(ctx context.Context, args map[string]any) (*registry.Result, error) {
				return structured(map[string]any{"id": "u1", "size": 3.0, "shape": map[string]any{"kind": "circle", "radius": 1.5}, "value": "v"}), nil
			}),
		fakeTool(t, "agent_orchestrate", "", "", func(ctx context.Context, args map[string]any) (*registry.Result, error) {
			return structured(map[string]any{}), nil
		}),
	}
	return registry.NewCatalog(tools...)
}

// blogCatalog has the blog-writing example tools: they answer with
// artifact envelopes.
func blogCatalog(t testing.TB) *registry.Catalog {
	envOut := `{"type":"object","properties":{
		"artifact_id":{"type":"string"},
		"artifact":{"type":"object","properties":{"content":{"type":"string"},"sources":{"type":"array","items":{"type":"string"}}}},
		"skill_id":{"type":"string"},
		"_metadata":{"type":"object","properties":{"skill_id":{"type":"string"}}}},"required":["artifact_id"]}`
	return registry.NewCatalog(
		fakeTool(t, "research_blog", `{"type":"object","properties":{"topic":{"type":"string"},"skill_id":{"type":"string"}},"required":["topic"]}`, envOut,
			func(ctx context.Context, args map[string]any) (*registry.Result, error) {
				return structured(map[string]any{
					"artifact_id": "research-1",
					"artifact":    map[string]any{"content": "notes on " + argString(args, "topic", ""), "sources": []any{"s1", "s2"}},
					"_metadata":   map[string]any{"skill_id": argString(args, "skill_id", "")},
				}), nil
			}),
		fakeTool(t, "create_blog_post", `{"type":"object","properties":{"artifact_id":{"type":"string"},"skill_id":{"type":"string"},"instructions":{"type":"string"}},"required":["artifact_id"]}`, envOut,
			func(ctx context.Context, args map[string]any) (*registry.Result, error) {
				return structured(map[string]any{
					"artifact_id": "post-1",
					"skill_id":    argString(args, "skill_id", ""),
					"artifact":    map[string]any{"content": "post from " + argString(args, "artifact_id", "")},
					"_metadata":   map[string]any{"skill_id": "ignored"},
				}), nil
			}),
	)
}
