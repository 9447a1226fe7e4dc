package cli

import (
	"strings"
	"testing"
)

// Every listed command answers -h with its flags, and names are unique:
// the list in cli.go is the whole command line.
func TestEveryCommandHasHelp(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Commands() {
		if seen[c.Name] {
			t.Errorf("command %s is listed twice", c.Name)
		}
		seen[c.Name] = true
		var stdout, stderr strings.Builder
		if code := Run(t.Context(), []string{c.Name, "-h"}, strings.NewReader(""), &stdout, &stderr); code != ExitOK {
			t.Errorf("orchestra %s -h exited %d: %s", c.Name, code, stderr.String())
		}
		if !strings.HasPrefix(stderr.String(), "Usage of orchestra "+c.Name) {
			t.Errorf("orchestra %s -h printed %q", c.Name, stderr.String())
		}
	}
	var stdout strings.Builder
	Run(t.Context(), []string{"help"}, strings.NewReader(""), &stdout, &stdout)
	for name := range seen {
		if !strings.Contains(stdout.String(), "orchestra "+name+" ") {
			t.Errorf("orchestra help does not list %s", name)
		}
	}
}

// A usage error names the command that ran, its synopsis and a hint.
func TestUsageErrorNamesTheCommand(t *testing.T) {
	var stdout, stderr strings.Builder
	code := Run(t.Context(), []string{"version", "extra"}, strings.NewReader(""), &stdout, &stderr)
	want := "orchestra version: unexpected argument \"extra\"\nusage: orchestra version \nhint: version takes no arguments\n"
	if code != ExitInvalid || stderr.String() != want {
		t.Errorf("exit %d, stderr %q; want %d, %q", code, stderr.String(), ExitInvalid, want)
	}
}
