package version_test

import (
	"testing"

	"github.com/orchestra-mcp/orchestra/internal/version"
)

// TestString: a test binary carries no stamp and no module version, so it
// is "dev"; a stamp wins. (.ci/dist.sh checks the stamp of the release
// binary itself.)
func TestString(t *testing.T) {
	if got := version.String(); got != "dev" {
		t.Errorf("unstamped String() = %q, want dev", got)
	}
	defer func(v string) { version.Version = v }(version.Version)
	version.Version = "1.2.3"
	if got := version.String(); got != "1.2.3" {
		t.Errorf("stamped String() = %q, want 1.2.3", got)
	}
}
