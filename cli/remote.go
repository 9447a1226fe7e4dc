package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/internal/version"
	"github.com/orchestra-mcp/orchestra/orchestrate"
)

// Background runs live in the server that started them: orchestra run
// --background, wait and cancel talk to it over Streamable HTTP (--url, the
// /mcp endpoint of `orchestra serve --http`), as any MCP client does, with
// the bearer token in $ORCHESTRA_TOKEN when the server asks for one.

// tokenEnv names the variable that holds the bearer token of --url.
const tokenEnv = "ORCHESTRA_TOKEN"

// urlFlag adds --url to fs.
func urlFlag(fs *flag.FlagSet) *string {
	return fs.String("url", "", "the `URL` of the /mcp endpoint of `orchestra serve --http` that holds the background run (bearer token from $"+tokenEnv+")")
}

// bearer adds a bearer token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// callRemote calls agent_orchestrate with args on the server at url and
// returns the envelope of its answer.
func callRemote(ctx context.Context, url string, args map[string]any) (*orchestrate.Envelope, error) {
	hc := http.DefaultClient
	if tok := os.Getenv(tokenEnv); tok != "" {
		hc = &http.Client{Transport: bearer{tok}}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "orchestra-cli", Version: version.String()}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", url, err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: orchestrate.ToolName, Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("calling %s at %s: %w", orchestrate.ToolName, url, err)
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return nil, fmt.Errorf("reading the answer of %s: %w", url, err)
	}
	var env orchestrate.Envelope
	if err := json.Unmarshal(data, &env); err != nil || env.Artifact == nil {
		return nil, fmt.Errorf("the answer of %s is no envelope: %s", url, data)
	}
	return &env, nil
}

// runBackground starts the request in args on the server at url and
// prints the run's exec id, or the envelope of a request it refused.
func runBackground(ctx context.Context, env *cliEnv, url string, args map[string]any) int {
	args["background"] = true
	result, err := callRemote(ctx, url, args)
	if err != nil {
		env.errorf("%v", err)
		return ExitFailed
	}
	if result.Artifact.Status != orchestrate.StatusRunning || result.Artifact.Background == nil {
		return printResult(env, result)
	}
	fmt.Fprintln(env.stdout, result.Artifact.Background.ExecID)
	fmt.Fprintln(env.stderr, result.Summary())
	return ExitOK
}

// remoteID parses the flags of wait and cancel: --url and one exec id.
func remoteID(env *cliEnv, fs *flag.FlagSet, url *string, args []string) (string, int, bool) {
	if code, ok := parse(env, fs, args); !ok {
		return "", code, false
	}
	if fs.NArg() != 1 {
		return "", env.usageError(fmt.Sprintf("expected one exec id, got %d", fs.NArg()), "give the exec id `orchestra run --background` printed"), false
	}
	if *url == "" {
		return "", env.usageError("missing --url", "background runs live in the server that started them: --url http://127.0.0.1:8080/mcp"), false
	}
	return fs.Arg(0), 0, true
}

// cmdWait waits for a background run and prints its final envelope: one
// await after another, each answered by the server when the run ends or
// after awaitStep, printing the progress of each on stderr.
func cmdWait(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "wait", nil)
	url := urlFlag(fs)
	id, code, ok := remoteID(env, fs, url, args)
	if !ok {
		return code
	}
	for {
		result, err := callRemote(ctx, *url, map[string]any{"await": map[string]any{"exec_id": id, "timeout_ms": awaitStep}})
		if err != nil {
			env.errorf("%v", err)
			return ExitFailed
		}
		if result.Artifact.Status != orchestrate.StatusRunning || ctx.Err() != nil {
			return printResult(env, result)
		}
		fmt.Fprintln(env.stderr, result.Summary())
	}
}

// awaitStep is how long, in milliseconds, each await of wait asks for.
const awaitStep = 30000

// cmdCancel cancels a background run and prints its envelope.
func cmdCancel(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "cancel", nil)
	url := urlFlag(fs)
	id, code, ok := remoteID(env, fs, url, args)
	if !ok {
		return code
	}
	result, err := callRemote(ctx, *url, map[string]any{"cancel": map[string]any{"exec_id": id}})
	if err != nil {
		env.errorf("%v", err)
		return ExitFailed
	}
	writeJSON(env.stdout, result)
	fmt.Fprintln(env.stderr, result.Summary())
	if len(result.Artifact.ValidationErrors) > 0 {
		return ExitInvalid
	}
	return ExitOK
}
