package builtin_test

import (
	"context"
	"fmt"

	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/registry/builtin"
)

func ExampleJSONQuery() {
	// The tool evaluates in worker processes, which the program owns.
	var workers builtin.Workers
	defer workers.Close()
	tool := builtin.JSONQuery(builtin.JQConfig{}, builtin.Options{Workers: &workers})
	res, err := tool.Invoke(context.Background(), &registry.CallRequest{Arguments: map[string]any{
		"query": "[.items[] | select(.stars >= $min) | .name]",
		"input": map[string]any{"items": []any{
			map[string]any{"name": "gojq", "stars": 3000.0},
			map[string]any{"name": "tiny", "stars": 2.0},
		}},
		"vars": map[string]any{"min": 100.0},
	}})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Output().(map[string]any)["result"])
	// Output: [gojq]
}

func ExampleRender() {
	var workers builtin.Workers
	defer workers.Close()
	tool := builtin.Render(builtin.RenderConfig{}, builtin.Options{Workers: &workers})
	res, err := tool.Invoke(context.Background(), &registry.CallRequest{Arguments: map[string]any{
		"template": `{{len .names}} found: {{join ", " .names | upper}}`,
		"values":   map[string]any{"names": []any{"gojq", "jq"}},
	}})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Text())
	// Output: 2 found: GOJQ, JQ
}

func ExampleTools() {
	cfg := builtin.DefaultConfig()
	cfg.HTTP.AllowedHosts = []string{"api.github.com", "*.example.com"}
	cat := registry.NewCatalog(builtin.Tools(cfg, builtin.Options{})...)
	fmt.Println(cat.Names())
	// Output: [http_request json_query render]
}
