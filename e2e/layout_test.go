package e2e

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// module is orchestra's module path.
const module = "github.com/orchestra-mcp/orchestra"

// layers is the allowed import graph: each package of the module, by its
// path in the module, and its layer. A package may import only packages
// of lower layers, so every arrow runs downward, and main, at the top,
// calls the CLI. A new package gets a line here, in the layer below
// everything that imports it and above everything it imports.
var layers = map[string]int{
	// The decoding gate and the pieces the schema loader uses, below it;
	// text cutting, which the store uses.
	"internal/jsongate": -1, "internal/boundedmap": -1, "internal/textcut": -1,

	// Small shared pieces and leaves that import nothing of orchestra
	// (the schema loader: the gate only).
	"internal/schemaload": 0, "e2e/hostile": 0,
	"internal/bytesize": 0, "internal/duration": 0, "internal/fairshare": 0,
	"internal/jsonrpcerr": 0, "internal/plural": 0, "internal/rank": 0, "internal/redact": 0, "internal/suggest": 0,
	"internal/timeline": 0, "internal/version": 0, "internal/worker": 0,
	"fsm": 0, "store": 0, "packaging/mcpb": 0, "packaging/npm": 0,
	"testutil/fakeopenai": 0, "testutil/jwttest": 0, "testutil/pgtest": 0, "testutil/termtest": 0, "e2e": 0,

	// The vocabulary: budgets, models, schemas, the tool interface.
	"budget": 1, "llm": 1, "schemas": 1, "registry": 1,
	"toolcontext": 2,

	// The engine, the tools and the viewer of records.
	"orchestrate": 3, "registry/builtin": 3, "registry/mcpserver": 3, "testutil/nestful": 3, "viewer": 3,
	"toolloop": 4, "telemetry": 4, "server/progress": 4, "testutil/servertest": 4, "cli/termview": 4,
	"planner": 5, "agents": 5, "workflows": 5,

	// The configuration, which names all of the above.
	"config": 6,

	// The server's parts, by job, then the server.
	"server/tenancy": 7, "server/secrets": 7, "server/records": 7,
	"server/httpedge": 8, "server/runlog": 8,
	"server": 9,

	// The entry points.
	"cli": 10, "cmd/soak": 10,
	"": 11, // main
}

// listedPackage is what go list says of a package.
type listedPackage struct {
	ImportPath string
	Dir        string
	Imports    []string
	GoFiles    []string
	CgoFiles   []string
}

// modulePackages lists the module's packages, with their imports.
func modulePackages(t *testing.T) []listedPackage {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decoding go list's output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list ./... listed no package")
	}
	return pkgs
}

// rel is a package's path in the module, "" for the module's root.
func rel(path string) (string, bool) {
	if path == module {
		return "", true
	}
	r, ok := strings.CutPrefix(path, module+"/")
	return r, ok
}

// upwardImports returns the imports of graph (package → its imports, as
// paths in the module) that layers forbids, and the packages it does not
// place.
func upwardImports(graph map[string][]string, layers map[string]int) []string {
	var bad []string
	for _, from := range slices.Sorted(maps.Keys(graph)) {
		lf, ok := layers[from]
		if !ok {
			bad = append(bad, fmt.Sprintf("package %q has no layer: add it to layers", from))
			continue
		}
		for _, to := range graph[from] {
			lt, ok := layers[to]
			switch {
			case !ok:
				bad = append(bad, fmt.Sprintf("%q imports %q, which has no layer: add it to layers", from, to))
			case lt >= lf:
				bad = append(bad, fmt.Sprintf("%q (layer %d) imports %q (layer %d): an import must run to a lower layer", from, lf, to, lt))
			}
		}
	}
	return bad
}

// TestImportGraph keeps every import of the module's code running
// downward, as layers allows.
func TestImportGraph(t *testing.T) {
	graph := map[string][]string{}
	for _, p := range modulePackages(t) {
		from, _ := rel(p.ImportPath)
		graph[from] = []string{}
		for _, imp := range p.Imports {
			if to, ok := rel(imp); ok {
				graph[from] = append(graph[from], to)
			}
		}
	}
	for _, msg := range upwardImports(graph, layers) {
		t.Error(msg)
	}
	for p := range layers {
		if _, ok := graph[p]; !ok {
			t.Errorf("layers places %q, which is not a package of the module", p)
		}
	}
}

// TestImportGraphRefusesUpwardImports checks the check: an import from a
// lower layer to a higher one, one within a layer, and a package with no
// layer are all refused.
func TestImportGraphRefusesUpwardImports(t *testing.T) {
	for name, graph := range map[string]map[string][]string{
		"upward":      {"orchestrate": {"server"}, "server": {}},
		"same layer":  {"planner": {"agents"}, "agents": {}},
		"no layer":    {"newpkg": {}},
		"to no layer": {"server": {"newpkg"}},
	} {
		if bad := upwardImports(graph, layers); len(bad) == 0 {
			t.Errorf("%s: %v passed", name, graph)
		}
	}
	if bad := upwardImports(map[string][]string{"server": {"orchestrate", "internal/textcut"}}, layers); len(bad) > 0 {
		t.Errorf("downward imports refused: %v", bad)
	}
}

// TestInternalImportsNothingAbove keeps internal/ a drawer of small shared
// pieces: no package there depends, even indirectly, on a package of
// orchestra outside internal/.
func TestInternalImportsNothingAbove(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}`, "./internal/...").Output()
	if err != nil {
		t.Fatalf("go list -deps ./internal/...: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if r, ok := rel(p); ok && !strings.HasPrefix(r, "internal/") {
			t.Errorf("a package of internal/ depends on %s: move what it needs into internal/, or the package out of it", p)
		}
	}
}

// allowedInits are the init functions the module's code may declare, by
// file: none. Nothing happens because a package was imported; what must
// happen at start-up is called from main.
var allowedInits = map[string]bool{}

// TestNoInit finds every init function of the module's code and refuses
// those allowedInits does not list.
func TestNoInit(t *testing.T) {
	for _, p := range modulePackages(t) {
		for _, name := range slices.Concat(p.GoFiles, p.CgoFiles) {
			path := filepath.Join(p.Dir, name)
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			r, _ := rel(p.ImportPath)
			file := filepath.ToSlash(filepath.Join(r, name))
			for _, d := range f.Decls {
				if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == "init" && !allowedInits[file] {
					t.Errorf("%s declares init(): make it an explicit call (from main, or from the constructor that needs it)", file)
				}
			}
		}
	}
}
