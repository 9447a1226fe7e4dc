package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSelfAsDownstream: a configuration that lists orchestra as its own
// stdio server used to start copies of itself without end (11 levels in
// under a second). Each copy tells the next its depth, and the one at
// max_depth starts no server: the chain is four processes deep, and ends
// with the first.
func TestSelfAsDownstream(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "self.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "limits:\n  max_depth: 3\nmcpServers:\n  self:\n    command: %q\n    args: [serve, --config, %q]\n", orchestraBin, cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), orchestraBin, "tools", "--json", "--config", cfg).Output()
	if err != nil {
		t.Fatalf("orchestra tools: %v\n%s", err, out)
	}
	var listing struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(out, &listing); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	deepest := 0
	for _, tool := range listing.Tools {
		deepest = max(deepest, strings.Count(tool.Name, "self__"))
	}
	if deepest != 3 {
		t.Errorf("the deepest tool is %d servers down, want 3 (processes at depths 1 to 3, the last starting none):\n%s", deepest, out)
	}
	waitNoProcess(t, dir)
}
