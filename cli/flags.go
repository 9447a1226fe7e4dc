package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/orchestra-mcp/orchestra/cli/termview"
	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/internal/jsongate"
	"github.com/orchestra-mcp/orchestra/internal/version"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/server/secrets"
	"github.com/orchestra-mcp/orchestra/store"
)

// commonFlags are the flags every command that builds an app takes.
type commonFlags struct {
	config    string
	logLevel  string
	logFormat string
	logFile   string
	store     string
	records   bool // the command keeps execution records (it has --store)
	// service marks a command that serves (serve): it logs at info by
	// default; the others say only what went wrong.
	service bool
	// progress is --progress, for the commands that run plans: whether
	// stderr shows the run live.
	progress string
	view     *termview.View // made by load when the command has --progress
}

func newFlagSet(env *cliEnv, name string, cf *commonFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("orchestra "+name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	if cf != nil {
		fs.StringVar(&cf.config, "config", "", "configuration `file` (YAML or JSON); default $ORCHESTRA_CONFIG")
		level := "warn"
		if cf.service {
			level = "info"
		}
		fs.StringVar(&cf.logLevel, "log-level", level, "log `level`: debug, info, warn or error")
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
			return ExitOK, false
		}
		fmt.Fprintf(env.stderr, "hint: run `%s -h` for the flags\n", fs.Name())
		return ExitInvalid, false
	}
	return 0, true
}

// retention is the retention of cfg's execution records, for a command
// that prunes them as it opens them.
func retention(cfg *config.Config) store.Retention {
	return store.Retention{MaxAge: cfg.Store.Retention.MaxAge.D(), MaxRuns: cfg.Store.Retention.MaxRuns}
}

// progressFlag adds --progress to a command that runs plans.
func (cf *commonFlags) progressFlag(fs *flag.FlagSet) {
	fs.StringVar(&cf.progress, "progress", "auto", "show the run's steps on stderr as they run: `WHEN` is auto (when stderr is a terminal; plain lines if TERM=dumb or NO_COLOR is set), always or never")
}

// hooks returns the hooks of the command's live view, if it has one.
func (cf *commonFlags) hooks() *orchestrate.Hooks {
	if cf.view == nil {
		return nil
	}
	return cf.view.Hooks()
}

// closeView ends the command's live view, if it has one, before the
// command writes its result: the view's last frame stays on screen.
func (cf *commonFlags) closeView() {
	if cf.view != nil {
		cf.view.Close()
	}
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
	if cf.progress != "" && cf.progress != "auto" && cf.progress != "always" && cf.progress != "never" {
		env.errorf("invalid --progress %q", cf.progress)
		fmt.Fprintln(env.stderr, "hint: use --progress auto, always or never")
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
	if cf.progress != "" {
		cf.view = termview.New(env.stderr, termview.Options{Mode: progressMode(cf.progress, env.stderr)})
		env.closers = append(env.closers, func() error { cf.view.Close(); return nil })
		if cf.logFile == "" {
			w = cf.view.Writer() // log lines go above the view's rows
		}
	}
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, hopts)
	if cf.logFormat == "json" {
		h = slog.NewJSONHandler(w, hopts)
	}
	return cfg, slog.New(secrets.NewHandler(h, secrets.Of(cfg))), true
}

// progressMode is how --progress when shows runs on stderr: live on a
// terminal, plain lines on one that cannot move its cursor (or when asked
// to always show them elsewhere), or not at all.
func progressMode(when string, stderr io.Writer) termview.Mode {
	mode := termview.Detect(stderr, os.Getenv)
	switch {
	case when == "never":
		return termview.Off
	case when == "always" && mode == termview.Off:
		return termview.Lines
	}
	return mode
}

// noArgs refuses the arguments of a command that takes only flags.
func noArgs(env *cliEnv, fs *flag.FlagSet, hint string) (int, bool) {
	if fs.NArg() > 0 {
		return env.usageError(fmt.Sprintf("unexpected argument %q", fs.Arg(0)), hint), false
	}
	return 0, true
}

// openApp loads the configuration cf names and builds the app: how a
// command that serves or runs plans begins once its flags and arguments
// are read. The command's view of its runs (--progress), if it has one,
// sees the app's runs. Run closes the app when the command returns.
func (e *cliEnv) openApp(ctx context.Context, cf *commonFlags, opts server.Options) (*server.App, bool) {
	cfg, logger, ok := cf.load(e)
	if !ok {
		return nil, false
	}
	opts.Hooks = cf.hooks()
	return e.newApp(ctx, cfg, logger, opts)
}

// newApp builds the app of cfg, for a command that needs the
// configuration before the app; the logger and version are set. Run
// closes the app when the command returns.
func (e *cliEnv) newApp(ctx context.Context, cfg *config.Config, logger *slog.Logger, opts server.Options) (*server.App, bool) {
	opts.Logger, opts.Version = logger, version.String()
	app, err := server.New(ctx, cfg, opts)
	if err != nil {
		e.errorf("%v", err)
		return nil, false
	}
	e.closers = append(e.closers, app.Close)
	return app, true
}

// openStore opens the execution records of cfg for a command that reads
// them without an app. Run closes them when the command returns.
func (e *cliEnv) openStore(ctx context.Context, cfg *config.Config, opts store.Options) (*store.Store, bool) {
	st, err := store.Open(ctx, cfg.Store.Path, opts)
	if err != nil {
		e.errorf("%v", err)
		fmt.Fprintln(e.stderr, "hint: check --store or store.path in the configuration file")
		return nil, false
	}
	e.closers = append(e.closers, st.Close)
	return st, true
}

// printResult prints a run's envelope, as JSON on stdout and summed up on
// stderr, and returns the exit code it calls for: invalid input, a paused
// run (it goes on with orchestra resume ID --results FILE), or the run's
// success.
func printResult(env *cliEnv, result *orchestrate.Envelope) int {
	writeJSON(env.stdout, result)
	fmt.Fprintln(env.stderr, result.Summary())
	switch {
	case len(result.Artifact.ValidationErrors) > 0:
		return ExitInvalid
	case result.Artifact.Status == orchestrate.StatusAwaitingClient:
		return ExitOK
	case !result.Artifact.Success:
		return ExitFailed
	}
	return ExitOK
}

// errTooLarge is an input past the decoding gate's limits.
var errTooLarge = errors.New("too large")

// tooLarge says which limit an input passed; it is errTooLarge.
type tooLarge struct{ msg string }

func (e *tooLarge) Error() string        { return e.msg }
func (e *tooLarge) Is(target error) bool { return target == errTooLarge }

// readInput reads a file, or stdin for "-", through the decoding gate:
// reading stops past gate.Bytes, so an endless source (/dev/zero) fails at
// once.
func readInput(env *cliEnv, path string, gate jsongate.Limits) ([]byte, error) {
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
	data, err := gate.ReadAll(r)
	if _, ok := jsongate.AsError(err); ok {
		return nil, &tooLarge{jsongate.Describe("the input", err, orchestrate.RequestGateKeys())}
	}
	return data, err
}

// planned is what run and validate work on: the configuration and the
// plan argument, decoded.
type planned struct {
	cfg    *config.Config
	logger *slog.Logger
	req    *orchestrate.Request
	issues []*orchestrate.Issue
}

// planInput is how run and validate begin: it parses their flags (fs,
// with cf's), loads the configuration cf names, and reads and decodes the
// plan argument.
func planInput(env *cliEnv, fs *flag.FlagSet, cf *commonFlags, args []string) (*planned, int, bool) {
	if code, ok := parse(env, fs, args); !ok {
		return nil, code, false
	}
	cfg, logger, ok := cf.load(env)
	if !ok {
		return nil, ExitInvalid, false
	}
	cmd := env.cmd.name
	if fs.NArg() != 1 {
		problem := "missing PLAN argument"
		if fs.NArg() > 1 {
			problem = fmt.Sprintf("expected one PLAN argument, got %d", fs.NArg())
		}
		return nil, env.usageError(problem, "give a plan file, or - to read the plan from stdin: orchestra "+cmd+" examples/quickstart.json"), false
	}
	data, err := readInput(env, fs.Arg(0), cfg.Server.RequestGate())
	if err != nil {
		env.errorf("reading the plan: %v", err)
		hint := "check the path, or give - to read the plan from stdin"
		if errors.Is(err, errTooLarge) {
			hint = "send a smaller plan, or raise the limit in the configuration file"
		}
		fmt.Fprintf(env.stderr, "hint: %s\n", hint)
		return nil, ExitInvalid, false
	}
	req, issues := orchestrate.DecodeRequest(data)
	return &planned{cfg: cfg, logger: logger, req: req, issues: issues}, 0, true
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
