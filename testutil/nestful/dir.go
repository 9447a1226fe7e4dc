package nestful

import (
	"os"
	"path/filepath"
	"testing"
)

// Dir returns the NESTFUL folder for a test: ../shared/datasets/nestful
// next to the module root (the nearest directory above the working
// directory that holds go.mod), or the folder ORCHESTRA_NESTFUL names. It
// skips the test when the folder is absent.
func Dir(t testing.TB) string {
	t.Helper()
	if dir := os.Getenv("ORCHESTRA_NESTFUL"); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "executable-data.json")); err != nil {
			t.Skipf("NESTFUL dataset not found at %s (ORCHESTRA_NESTFUL): skipping", dir)
		}
		return dir
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Skipf("NESTFUL dataset: cannot get the working directory: %v", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			dir := filepath.Join(d, "..", "shared", "datasets", "nestful")
			if _, err := os.Stat(filepath.Join(dir, "executable-data.json")); err != nil {
				t.Skipf("NESTFUL dataset not found at %s: skipping", dir)
			}
			return dir
		}
		if filepath.Dir(d) == d {
			t.Skipf("NESTFUL dataset: no go.mod above %s: skipping", wd)
		}
	}
}
