package cli

import (
	"context"
	"fmt"

	"github.com/orchestra-mcp/orchestra/internal/version"
)

func cmdVersion(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "version", nil)
	if code, ok := parse(env, fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return env.usageError(fmt.Sprintf("unexpected argument %q", fs.Arg(0)), "version takes no arguments")
	}
	fmt.Fprintf(env.stdout, "orchestra %s\n", version.String())
	return ExitOK
}
