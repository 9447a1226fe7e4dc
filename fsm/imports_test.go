package fsm

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOnlyTheEngineImportsFSM keeps the state machine the engine's own
// business: everything else observes runs through orchestrate.Hooks, so
// no package but orchestrate (and this one) may import this package or
// looplab/fsm.
func TestOnlyTheEngineImportsFSM(t *testing.T) {
	const self = "github.com/orchestra-mcp/orchestra/fsm"
	allowed := map[string]bool{"fsm": true, "orchestrate": true}
	root := ".."
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if (p == self || p == "github.com/looplab/fsm") && !allowed[filepath.ToSlash(rel)] {
				t.Errorf("%s imports %s: observe runs through orchestrate.Hooks instead", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
