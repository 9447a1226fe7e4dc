package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEndlessAndHostileFiles: --config /dev/zero and resume --results
// /dev/zero read until memory ran out. Every file the CLI reads passes
// the decoding gate: an endless one, one nested too deep and one with too
// many values each exit 2 with an error naming the bound, before anything
// is decoded.
func TestEndlessAndHostileFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	deep := write("deep.json", strings.Repeat("[", 100_000)+strings.Repeat("]", 100_000))
	wide := write("wide.json", "["+strings.Repeat("0,", 599_999)+"0]")
	t.Setenv("ORCHESTRA_CONFIG", "")
	t.Setenv("XDG_STATE_HOME", dir)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"config /dev/zero", []string{"tools", "--config", "/dev/zero"}, "larger than"},
		{"plan /dev/zero", []string{"validate", "/dev/zero"}, "larger than"},
		{"results /dev/zero", []string{"resume", "--store", "memory", "--results", "/dev/zero", "some-run"}, "larger than"},
		{"context /dev/zero", []string{"ask", "--context", "/dev/zero", "a goal"}, "larger than"},
		{"plan too deep", []string{"validate", deep}, "nested deeper"},
		{"results too deep", []string{"resume", "--store", "memory", "--results", deep, "some-run"}, "nested deeper"},
		{"context too wide", []string{"ask", "--context", wide, "a goal"}, "values"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Run(t.Context(), tc.args, strings.NewReader(""), &stdout, &stderr)
			if code != ExitInvalid || !strings.Contains(stderr.String()+stdout.String(), tc.want) {
				t.Errorf("orchestra %s: exit %d, want %d saying %q:\n%s%s", strings.Join(tc.args, " "), code, ExitInvalid, tc.want, stderr.String(), stdout.String())
			}
		})
	}
}
