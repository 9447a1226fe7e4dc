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
	if code, ok := noArgs(env, fs, "version takes no arguments"); !ok {
		return code
	}
	fmt.Fprintf(env.stdout, "orchestra %s\n", version.String())
	return ExitOK
}
