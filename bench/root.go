package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// orchestraModule is the module the harness measures.
const orchestraModule = "github.com/orchestra-mcp/orchestra"

// orchestraDir returns the directory of orchestra's module, above the
// harness's own: orchestra and the fixture server are built there, and the
// NESTFUL data is found next to it.
func orchestraDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if data, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && modulePath(data) == orchestraModule {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no %s module in %s or above it: run the harness inside orchestra's repository (go -C bench run .)", orchestraModule, wd)
		}
	}
}

// modulePath returns the path a go.mod file declares.
func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}
