package cli

import (
	"context"
	"fmt"
	"runtime/debug"
)

func cmdVersion(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "version", nil)
	if code, ok := parse(env, fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return env.usageError(fmt.Sprintf("unexpected argument %q", fs.Arg(0)), "version takes no arguments")
	}
	fmt.Fprintf(env.stdout, "orchestra %s\n", version())
	return exitOK
}

// version is the module version the binary was built from, or "dev".
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
