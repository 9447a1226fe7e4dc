package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/internal/suggest"
	"github.com/orchestra-mcp/orchestra/internal/version"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry/mcpserver"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/store"
)

// Exit codes.
const (
	exitOK      = 0 // success
	exitFailed  = 1 // the plan ran and did not succeed, or the server failed
	exitInvalid = 2 // invalid input or usage
)

// command is one subcommand.
type command struct {
	name    string
	args    string // synopsis of the arguments
	summary string
	run     func(ctx context.Context, env *cliEnv, args []string) int
}

// commands lists the subcommands; the README's CLI reference is generated
// from it.
var commands []command

func init() {
	commands = []command{
		{"serve", "[--config FILE] [--store PATH] [--http ADDR] [--stateless] [--insecure] [--metrics-addr ADDR]", "Serve MCP over stdio, or Streamable HTTP at /mcp with --http.", cmdServe},
		{"run", "[--config FILE] [--store PATH] PLAN.json|-", "Run a plan (the tool's input, or just a plan) and print the result envelope as JSON.", cmdRun},
		{"validate", "[--config FILE] PLAN.json|-", "Check a plan against every plan-time rule without running it.", cmdValidate},
		{"tools", "[--config FILE] [--json]", "List the tools a plan can call, with their schemas.", cmdTools},
		{"version", "", "Print the version.", cmdVersion},
	}
}

// cliEnv is what a subcommand works with.
type cliEnv struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

func (e *cliEnv) errorf(format string, args ...any) {
	fmt.Fprintf(e.stderr, "orchestra: "+format+"\n", args...)
}

// usageError prints a usage problem with its hint and returns exitInvalid.
func (e *cliEnv) usageError(cmd, problem, hint string) int {
	fmt.Fprintf(e.stderr, "orchestra %s: %s\n", cmd, problem)
	for _, c := range commands {
		if c.name == cmd {
			fmt.Fprintf(e.stderr, "usage: orchestra %s %s\n", c.name, c.args)
		}
	}
	if hint != "" {
		fmt.Fprintf(e.stderr, "hint: %s\n", hint)
	}
	return exitInvalid
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	env := &cliEnv{stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		usage(stderr)
		fmt.Fprintln(stderr, "hint: give a command, e.g. `orchestra run examples/quickstart.json`")
		return exitInvalid
	}
	name := args[0]
	switch name {
	case "help", "-h", "--help", "-help":
		usage(stdout)
		return exitOK
	case "--version", "-version":
		name = "version"
	}
	for _, c := range commands {
		if c.name == name {
			return c.run(ctx, env, args[1:])
		}
	}
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	if s := suggest.Closest(name, names, 1); len(s) > 0 {
		fmt.Fprintf(stderr, "orchestra: unknown command %q; did you mean %q?\n", name, s[0])
	} else {
		fmt.Fprintf(stderr, "orchestra: unknown command %q\n", name)
	}
	fmt.Fprintf(stderr, "hint: the commands are %s; run `orchestra help` for more\n", strings.Join(names, ", "))
	return exitInvalid
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "orchestra runs a whole multi-step tool plan in one MCP tool call.")
	fmt.Fprintln(w, "\nUsage:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  orchestra %s %s\t%s\n", c.name, c.args, c.summary)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nRun `orchestra COMMAND -h` for the flags of a command.")
}

// commonFlags are the flags every command that builds an app takes.
type commonFlags struct {
	config    string
	logLevel  string
	logFormat string
	logFile   string
	store     string
	records   bool // the command keeps execution records (it has --store)
}

func newFlagSet(env *cliEnv, name string, cf *commonFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("orchestra "+name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	if cf != nil {
		fs.StringVar(&cf.config, "config", "", "configuration `file` (YAML or JSON); default $ORCHESTRA_CONFIG")
		fs.StringVar(&cf.logLevel, "log-level", "info", "log `level`: debug, info, warn or error")
		fs.StringVar(&cf.logFormat, "log-format", "text", "log `format`: text or json")
		fs.StringVar(&cf.logFile, "log-file", "", "append logs to `FILE` instead of stderr")
	}
	return fs
}

// parse parses flags; it returns false and the exit code when the command
// must stop (help was asked for, or the flags are wrong).
func parse(env *cliEnv, fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		fmt.Fprintf(env.stderr, "hint: run `%s -h` for the flags\n", fs.Name())
		return exitInvalid, false
	}
	return 0, true
}

// storeFlag adds --store to a command that keeps execution records.
func (cf *commonFlags) storeFlag(fs *flag.FlagSet) {
	cf.records = true
	fs.StringVar(&cf.store, "store", "", "execution records database `PATH`, or memory to keep nothing on disk; default store.path, else $XDG_STATE_HOME/orchestra/orchestra.db")
}

func (cf *commonFlags) load(env *cliEnv) (*config.Config, *slog.Logger, bool) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cf.logLevel)); err != nil {
		env.errorf("invalid --log-level %q", cf.logLevel)
		fmt.Fprintln(env.stderr, "hint: use --log-level debug, info, warn or error")
		return nil, nil, false
	}
	if cf.logFormat != "text" && cf.logFormat != "json" {
		env.errorf("invalid --log-format %q", cf.logFormat)
		fmt.Fprintln(env.stderr, "hint: use --log-format text or --log-format json")
		return nil, nil, false
	}
	if cf.config == "" {
		cf.config = os.Getenv("ORCHESTRA_CONFIG")
	}
	cfg := config.Default()
	if cf.config != "" {
		var err error
		if cfg, err = config.Load(cf.config); err != nil {
			env.errorf("%v", err)
			fmt.Fprintln(env.stderr, "hint: fix the configuration file; the README lists every key")
			return nil, nil, false
		}
	}
	if cf.store != "" {
		cfg.Store.Path = cf.store
	}
	if cfg.Store.Path == "" {
		cfg.Store.Path = store.Memory
		if cf.records {
			p, err := store.DefaultPath()
			if err != nil {
				env.errorf("%v", err)
				fmt.Fprintln(env.stderr, "hint: set XDG_STATE_HOME, or pass --store PATH (or --store memory)")
				return nil, nil, false
			}
			cfg.Store.Path = p
		}
	}
	w := env.stderr
	if cf.logFile != "" {
		f, err := os.OpenFile(cf.logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			env.errorf("opening the log file: %v", err)
			fmt.Fprintln(env.stderr, "hint: check the path of --log-file")
			return nil, nil, false
		}
		w = f // open until the process ends
	}
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, hopts)
	if cf.logFormat == "json" {
		h = slog.NewJSONHandler(w, hopts)
	}
	return cfg, slog.New(server.NewRedactingHandler(h, server.Secrets(cfg))), true
}

func newApp(ctx context.Context, env *cliEnv, cfg *config.Config, logger *slog.Logger) (*server.App, bool) {
	return newAppWith(ctx, env, cfg, logger, server.Options{})
}

// newAppWith is newApp with more options; the logger and version are set.
func newAppWith(ctx context.Context, env *cliEnv, cfg *config.Config, logger *slog.Logger, opts server.Options) (*server.App, bool) {
	opts.Logger, opts.Version = logger, version.String()
	app, err := server.New(ctx, cfg, opts)
	if err != nil {
		env.errorf("%v", err)
		return nil, false
	}
	return app, true
}

func cmdServe(ctx context.Context, env *cliEnv, args []string) int {
	var cf commonFlags
	fs := newFlagSet(env, "serve", &cf)
	addr := fs.String("http", "", "serve Streamable HTTP at `ADDR` (host:port, or :port for 127.0.0.1:port) instead of stdio")
	stateless := fs.Bool("stateless", false, "with --http: serve without sessions")
	insecure := fs.Bool("insecure", false, "with --http: allow a non-loopback address without authentication (server.auth)")
	metricsAddr := fs.String("metrics-addr", "", "with --http: serve Prometheus metrics at http://`ADDR`/metrics (host:port, or :port for 127.0.0.1:port)")
	cf.storeFlag(fs)
	if code, ok := parse(env, fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return env.usageError("serve", fmt.Sprintf("unexpected argument %q", fs.Arg(0)), "serve takes only flags")
	}
	if *addr == "" && (*stateless || *insecure || *metricsAddr != "") {
		return env.usageError("serve", "--stateless, --insecure and --metrics-addr apply only with --http", "add --http 127.0.0.1:8080")
	}
	cfg, logger, ok := cf.load(env)
	if !ok {
		return exitInvalid
	}
	var ln net.Listener
	if *addr != "" {
		hostport, err := listenAddr(*addr, *insecure || cfg.Server.Auth.Enabled())
		if err != nil {
			return env.usageError("serve", err.Error(), "bind a loopback address such as 127.0.0.1:8080, configure bearer tokens (server.auth in the configuration file), or pass --insecure to accept the risk")
		}
		if ln, err = net.Listen("tcp", hostport); err != nil {
			env.errorf("listening on %s: %v", hostport, err)
			return exitFailed
		}
		defer ln.Close()
	}
	var metricsLn net.Listener
	if *metricsAddr != "" {
		hostport, err := listenAddr(*metricsAddr, *insecure)
		if err != nil {
			return env.usageError("serve", strings.Replace(err.Error(), "--http", "--metrics-addr", 1), "bind a loopback address such as 127.0.0.1:9464, or pass --insecure to accept the risk")
		}
		if metricsLn, err = net.Listen("tcp", hostport); err != nil {
			env.errorf("listening on %s: %v", hostport, err)
			return exitFailed
		}
		defer metricsLn.Close()
	}
	app, ok := newAppWith(ctx, env, cfg, logger, server.Options{Metrics: metricsLn != nil})
	if !ok {
		return exitInvalid
	}
	defer app.Close()
	if metricsLn != nil {
		stop := serveMetrics(metricsLn, app.MetricsHandler())
		defer stop()
		fmt.Fprintf(env.stderr, "orchestra: serving metrics at http://%s/metrics\n", metricsLn.Addr())
	}
	var err error
	if ln != nil {
		fmt.Fprintf(env.stderr, "orchestra: serving MCP at http://%s/mcp\n", ln.Addr())
		err = app.ServeHTTP(ctx, ln, server.HTTPOptions{Stateless: *stateless})
	} else {
		err = app.ServeStdio(ctx, env.stdin, env.stdout)
	}
	if err != nil {
		env.errorf("%v", err)
		return exitFailed
	}
	return exitOK
}

// listenAddr fills in a loopback host and refuses non-loopback addresses
// unless authenticated (bearer tokens are configured) or insecure.
func listenAddr(addr string, authenticated bool) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("invalid --http address %q: %v", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if !authenticated && !isLoopback(host) {
		return "", fmt.Errorf("refusing to serve on %s without authentication: anyone who can reach it could run plans", net.JoinHostPort(host, port))
	}
	return net.JoinHostPort(host, port), nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// errTooLarge is an input over server.max_request_bytes.
var errTooLarge = errors.New("too large")

// readInput reads a file, or stdin for "-", up to limit bytes.
func readInput(env *cliEnv, path string, limit int64) ([]byte, error) {
	var r io.Reader
	if path == "-" {
		r = env.stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: the input is larger than %d bytes (server.max_request_bytes)", errTooLarge, limit)
	}
	return data, nil
}

// planInput reads and decodes the plan argument of run and validate.
func planInput(env *cliEnv, cmd string, fs *flag.FlagSet, cfg *config.Config) (*orchestrate.Request, []*orchestrate.Issue, int, bool) {
	if fs.NArg() != 1 {
		problem := "missing PLAN argument"
		if fs.NArg() > 1 {
			problem = fmt.Sprintf("expected one PLAN argument, got %d", fs.NArg())
		}
		return nil, nil, env.usageError(cmd, problem, "give a plan file, or - to read the plan from stdin: orchestra "+cmd+" examples/quickstart.json"), false
	}
	data, err := readInput(env, fs.Arg(0), cfg.Server.MaxRequestBytes)
	if err != nil {
		env.errorf("reading the plan: %v", err)
		hint := "check the path, or give - to read the plan from stdin"
		if errors.Is(err, errTooLarge) {
			hint = "send a smaller plan, or raise server.max_request_bytes in the configuration file"
		}
		fmt.Fprintf(env.stderr, "hint: %s\n", hint)
		return nil, nil, exitInvalid, false
	}
	req, issues := orchestrate.DecodeRequest(data)
	return req, issues, 0, true
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func cmdRun(ctx context.Context, env *cliEnv, args []string) int {
	var cf commonFlags
	fs := newFlagSet(env, "run", &cf)
	cf.storeFlag(fs)
	if code, ok := parse(env, fs, args); !ok {
		return code
	}
	cfg, logger, ok := cf.load(env)
	if !ok {
		return exitInvalid
	}
	req, issues, code, ok := planInput(env, "run", fs, cfg)
	if !ok {
		return code
	}
	app, ok := newApp(ctx, env, cfg, logger)
	if !ok {
		return exitInvalid
	}
	defer app.Close()
	var result *orchestrate.Envelope
	switch {
	case len(issues) > 0:
		result = app.Reject(ctx, issues, "cli")
	case req.Plan == nil:
		result = app.Reject(ctx, []*orchestrate.Issue{{Path: "prompt", Code: orchestrate.CodePlannerFailed, Message: "orchestra run takes a plan; no planner is configured to turn a prompt into one"}}, "cli")
	default:
		result = app.Run(ctx, req, "cli")
	}
	writeJSON(env.stdout, result)
	fmt.Fprintln(env.stderr, result.Summary())
	switch {
	case len(result.Artifact.ValidationErrors) > 0:
		return exitInvalid
	case !result.Artifact.Success:
		return exitFailed
	}
	return exitOK
}

func cmdValidate(ctx context.Context, env *cliEnv, args []string) int {
	var cf commonFlags
	fs := newFlagSet(env, "validate", &cf)
	if code, ok := parse(env, fs, args); !ok {
		return code
	}
	cfg, logger, ok := cf.load(env)
	if !ok {
		return exitInvalid
	}
	req, issues, code, ok := planInput(env, "validate", fs, cfg)
	if !ok {
		return code
	}
	type report struct {
		Valid    bool                 `json:"valid"`
		Errors   []*orchestrate.Issue `json:"errors"`
		Warnings []*orchestrate.Issue `json:"warnings"`
		Plan     *orchestrate.Plan    `json:"plan,omitempty"`
	}
	rep := report{Errors: issues, Warnings: []*orchestrate.Issue{}}
	if len(issues) == 0 {
		if req.Plan == nil {
			rep.Errors = []*orchestrate.Issue{{Path: "prompt", Code: orchestrate.CodeInvalidRequest, Message: "validate checks plans; this input has a prompt and no plan"}}
		} else {
			app, ok := newApp(ctx, env, cfg, logger)
			if !ok {
				return exitInvalid
			}
			defer app.Close()
			v := app.Engine.Validate(req)
			rep.Errors, rep.Warnings, rep.Plan = v.Errors, v.Warnings, req.Plan
		}
	}
	rep.Valid = len(rep.Errors) == 0
	writeJSON(env.stdout, rep)
	if !rep.Valid {
		fmt.Fprintf(env.stderr, "orchestra validate: the plan has %d problems\n", len(rep.Errors))
		return exitInvalid
	}
	return exitOK
}

func cmdTools(ctx context.Context, env *cliEnv, args []string) int {
	var cf commonFlags
	fs := newFlagSet(env, "tools", &cf)
	asJSON := fs.Bool("json", false, "print the full catalog with input and output schemas as JSON")
	if code, ok := parse(env, fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return env.usageError("tools", fmt.Sprintf("unexpected argument %q", fs.Arg(0)), "tools takes only flags")
	}
	cfg, logger, ok := cf.load(env)
	if !ok {
		return exitInvalid
	}
	app, ok := newApp(ctx, env, cfg, logger)
	if !ok {
		return exitInvalid
	}
	defer app.Close()
	tools := app.Catalog.List()
	if *asJSON {
		type entry struct {
			Name          string `json:"name"`
			Source        string `json:"source"`
			Mode          string `json:"mode"`
			Description   string `json:"description"`
			InputSchema   any    `json:"inputSchema"`
			OutputSchema  any    `json:"outputSchema,omitempty"`
			SchemaProblem string `json:"schema_problem,omitempty"`
		}
		out := []entry{}
		for _, t := range tools {
			e := entry{Name: t.Name, Source: t.Source, Mode: t.Mode.String(), Description: t.Description, SchemaProblem: t.SchemaProblem, InputSchema: t.InputSchema}
			if t.OutputSchema != nil {
				e.OutputSchema = t.OutputSchema
			}
			out = append(out, e)
		}
		servers := app.Downstream()
		if servers == nil {
			servers = []mcpserver.ServerStatus{}
		}
		writeJSON(env.stdout, map[string]any{"tools": out, "servers": servers})
		return exitOK
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tSOURCE\tOUTPUT SCHEMA\tSUMMARY")
	for _, t := range tools {
		out := "yes"
		if t.OutputSchema == nil {
			out = "no"
		}
		if t.SchemaProblem != "" {
			out = "unusable: " + t.SchemaProblem
		}
		summary, _, _ := strings.Cut(strings.TrimSpace(t.Description), "\n")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Source, out, summary)
	}
	tw.Flush()
	if servers := app.Downstream(); len(servers) > 0 {
		fmt.Fprintln(env.stdout)
		tw = tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SERVER\tSTATE\tTOOLS\tPROBLEMS")
		for _, st := range servers {
			var problems []string
			if st.Error != "" {
				problems = append(problems, st.Error)
			}
			problems = append(problems, st.ToolProblems...)
			for _, name := range slices.Sorted(maps.Keys(st.SchemaProblems)) {
				problems = append(problems, fmt.Sprintf("%s: schema unusable: %s", name, st.SchemaProblems[name]))
			}
			if len(problems) == 0 {
				problems = []string{"-"}
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", st.Name, st.State, len(st.Tools), strings.Join(problems, "; "))
		}
		tw.Flush()
	}
	return exitOK
}

func cmdVersion(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "version", nil)
	if code, ok := parse(env, fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return env.usageError("version", fmt.Sprintf("unexpected argument %q", fs.Arg(0)), "version takes no arguments")
	}
	fmt.Fprintf(env.stdout, "orchestra %s\n", version.String())
	return exitOK
}
