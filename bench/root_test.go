package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The harness finds orchestra's module above its own, wherever it runs.
func TestOrchestraDir(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	got, err := orchestraDir()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Dir(wd); got != want {
		t.Errorf("orchestraDir() = %s, want %s", got, want)
	}
	if _, err := os.Stat(filepath.Join(got, "testdata", "fixtureserver")); err != nil {
		t.Errorf("the fixture server the e2e section builds is not there: %v", err)
	}
	t.Chdir(t.TempDir())
	if dir, err := orchestraDir(); err == nil {
		t.Errorf("outside the repository, orchestraDir() = %s, want an error", dir)
	}
}

func TestModulePath(t *testing.T) {
	for in, want := range map[string]string{
		"module github.com/orchestra-mcp/orchestra\n\ngo 1.26.0\n":      orchestraModule,
		"// a comment\nmodule \"github.com/orchestra-mcp/orchestra\"\n": orchestraModule,
		"module github.com/orchestra-mcp/orchestra/bench\n":             orchestraModule + "/bench",
		"go 1.26.0\n": "",
	} {
		if got := modulePath([]byte(in)); got != want {
			t.Errorf("modulePath(%q) = %q, want %q", in, got, want)
		}
	}
}
