package orchestrate

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestCodesAreDeclaredInOneFile keeps every code in codes.go, each with
// what it means: no code is declared anywhere else, nor written as a bare
// string where a code goes (Code: "...", Code("...")).
func TestCodesAreDeclaredInOneFile(t *testing.T) {
	codeName := regexp.MustCompile(`^Code[A-Z]`)
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
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || filepath.ToSlash(path) == "../orchestrate/codes.go" {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GenDecl:
				if n.Tok != token.CONST {
					return true
				}
				for _, spec := range n.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if codeName.MatchString(name.Name) && i < len(vs.Values) && isStringLit(vs.Values[i]) || isCodeType(vs.Type) {
							t.Errorf("%s declares %s: declare codes in orchestrate/codes.go", path, name.Name)
						}
					}
				}
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Code" && isStringLit(n.Value) {
					t.Errorf("%s sets Code to a bare string: use a code of orchestrate/codes.go", path)
				}
			case *ast.CallExpr:
				if len(n.Args) == 1 && isCodeType(n.Fun) && isStringLit(n.Args[0]) {
					t.Errorf("%s converts a bare string to a Code: use a code of orchestrate/codes.go", path)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func isStringLit(e ast.Expr) bool {
	lit, ok := e.(*ast.BasicLit)
	return ok && lit.Kind == token.STRING && lit.Value != `""`
}

func isCodeType(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == "Code"
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		return ok && x.Name == "orchestrate" && e.Sel.Name == "Code"
	}
	return false
}

// TestCodesSayWhatTheyMean: every code in codes.go is a Code, unique,
// with a comment "CodeX: what it means", which the README's table shows.
func TestCodesSayWhatTheyMean(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "codes.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	n := 0
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		if !strings.Contains(gd.Doc.Text(), ": ") {
			t.Errorf("a block of codes without a comment \"Kind: what they are\": %q", gd.Doc.Text())
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			name := vs.Names[0].Name
			if !isCodeType(vs.Type) {
				t.Errorf("%s is not declared a Code", name)
			}
			if !strings.HasPrefix(vs.Doc.Text(), name+": ") {
				t.Errorf("the comment of %s does not start with %q and say what it means", name, name+": ")
			}
			value, err := strconv.Unquote(vs.Values[0].(*ast.BasicLit).Value)
			if err != nil {
				t.Fatal(err)
			}
			if other, dup := seen[value]; dup {
				t.Errorf("%s and %s are both %q", other, name, value)
			}
			seen[value] = name
			n++
		}
	}
	if n < 50 {
		t.Errorf("codes.go declares %d codes; the parse missed some", n)
	}
}
