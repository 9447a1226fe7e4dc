// Package version says which orchestra a binary is.
//
// Release builds stamp [Version] at link time:
//
//	go build -ldflags "-X github.com/orchestra-mcp/orchestra/internal/version.Version=1.2.0" .
//
// A binary built without the stamp reports the module version `go install`
// recorded, or "dev" for a build from a working tree.
package version

import "runtime/debug"

// Version is set by the linker in release builds; empty otherwise.
var Version string

// String is the version the binary reports: [Version] when stamped, else
// the main module's version from the build information, else "dev".
func String() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
