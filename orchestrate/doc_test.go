package orchestrate

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocNamesEveryFile keeps doc.go's map of the package whole: every
// source file is named there once, on a line of its own, and the map names
// no file that is gone.
func TestDocNamesEveryFile(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^//\t([a-z_]+\.go) +\S`).FindAllStringSubmatch(string(doc), -1) {
		listed[m[1]]++
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		have[f] = true
		switch listed[f] {
		case 0:
			t.Errorf("doc.go's map of files does not name %s: add a line saying what it holds", f)
		case 1:
		default:
			t.Errorf("doc.go's map of files names %s %d times", f, listed[f])
		}
	}
	for f := range listed {
		if !have[f] {
			t.Errorf("doc.go's map of files names %s, which is not in the package", f)
		}
	}
}
