// Command bench measures orchestra side by side with the ways of working it
// replaces, and writes what it measured as tables, CSV files and plots.
//
//	go -C bench run .                 # everything, a few minutes
//	go -C bench run . -quick          # every section scaled down, for CI
//	go -C bench run . -only model,http -out /tmp/bench
//
// The harness is a module of its own, so that its plotting library is no
// requirement of orchestra's; it uses orchestra's packages through a
// replace directive, and builds orchestra's binaries in orchestra's module.
//
// The sections are: overhead (the engine's cost per step), schedules
// (sequential, parallel groups and dag against the critical path of random
// DAGs), fanout (a group of N sleeping children), e2e (a 12-step plan over
// MCP stdio against the same calls made directly), model (ReAct against
// plan-execute-respond on the NESTFUL sequences with a simulated model),
// http (a trivial plan against a bare tool over Streamable HTTP), loop
// (listing 20 files, reading each and writing a report, as one orchestra
// call with for_each against a ReAct loop), slop (12 echo calls as one
// orchestra plan against slop-mcp's run_slop, with slop-mcp installed by
// `npm ci` in bench/slop) and repair (how often planning ends in a valid
// plan, at first and after repair, with and without lessons of earlier
// runs, with a simulated model that makes the mistakes validation catches).
//
// Nothing here asserts a time: it measures and reports. Compare ratios
// within one run; the machine may be shared.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/orchestra-mcp/orchestra/registry/builtin"
)

func main() {
	builtin.ServeWorker() // render evaluates in copies of this program
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is what the flags set.
type options struct {
	quick        bool
	out          string
	only         map[string]bool
	seed         uint64
	modelLatency time.Duration
	tokenLatency time.Duration
	toolLatency  time.Duration
	tasks        int
	nestful      string
	clients      int
	duration     time.Duration
}

var sections = []struct {
	name string
	run  func(ctx context.Context, c *options, r *report) error
}{
	{"overhead", overhead},
	{"schedules", schedules},
	{"fanout", fanout},
	{"e2e", endToEnd},
	{"model", modelRoundTrips},
	{"http", httpThroughput},
	{"loop", loopJob},
	{"slop", slopPeer},
	{"repair", repairQuality},
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &options{}
	fs.BoolVar(&c.quick, "quick", false, "scale every section down (seconds, not minutes), as CI runs it")
	fs.StringVar(&c.out, "out", "out", "write CSV files and plots into `dir` (relative to the current directory; the default is bench/out)")
	only := fs.String("only", "", "run only these comma-separated `sections`: "+sectionNames())
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the random DAGs")
	fs.DurationVar(&c.modelLatency, "model-latency", 800*time.Millisecond, "latency of one simulated model call (quick mode divides it by 100)")
	fs.DurationVar(&c.tokenLatency, "token-latency", 10*time.Millisecond, "latency of each output token of a simulated model call, on top of -model-latency (quick mode divides it by 100)")
	fs.DurationVar(&c.toolLatency, "tool-latency", 50*time.Millisecond, "latency of one tool call in the model section (quick mode divides it by 100)")
	fs.IntVar(&c.tasks, "tasks", 0, "NESTFUL tasks to run in the model section; 0 means all (quick: 20)")
	fs.StringVar(&c.nestful, "nestful", "", "the NESTFUL `dir`; default ../shared/datasets/nestful next to orchestra's module")
	fs.IntVar(&c.clients, "clients", 16, "concurrent clients in the http section")
	fs.DurationVar(&c.duration, "duration", 3*time.Second, "how long each http measurement runs (quick: 300ms)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the sections run in this process to `file` (the e2e section's servers are other processes)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bench: unexpected arguments %q; see -h\n", fs.Args())
		return 2
	}
	if *only != "" {
		c.only = map[string]bool{}
		known := strings.Split(sectionNames(), ", ")
		for _, s := range strings.Split(*only, ",") {
			if !slices.Contains(known, s) {
				fmt.Fprintf(stderr, "bench: unknown section %q; the sections are %s\n", s, sectionNames())
				return 2
			}
			c.only[s] = true
		}
	}
	if c.quick {
		c.modelLatency /= 100
		c.tokenLatency /= 100
		c.toolLatency /= 100
		if c.tasks == 0 {
			c.tasks = 20
		}
		c.duration = min(c.duration, 300*time.Millisecond)
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(stderr, "bench: -cpuprofile:", err)
			return 1
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	r := &report{w: stdout, dir: c.out}
	fmt.Fprintf(stdout, "orchestra bench: %s, %d CPUs (%s), %s/%s, quick=%v\n", runtime.Version(), runtime.NumCPU(), cpuModel(), runtime.GOOS, runtime.GOARCH, c.quick)
	failed := false
	for _, s := range sections {
		if c.only != nil && !c.only[s.name] {
			continue
		}
		start := time.Now()
		fmt.Fprintf(stdout, "\n== %s\n", s.name)
		if err := s.run(ctx, c, r); err != nil {
			fmt.Fprintf(stderr, "bench: %s: %v\n", s.name, err)
			failed = true
			continue
		}
		fmt.Fprintf(stdout, "(%s took %s)\n", s.name, time.Since(start).Round(time.Millisecond))
	}
	fmt.Fprintf(stdout, "\nCSV files and plots are in %s\n", c.out)
	if failed {
		return 1
	}
	return 0
}

func sectionNames() string {
	var names []string
	for _, s := range sections {
		names = append(names, s.name)
	}
	return strings.Join(names, ", ")
}

// cpuModel returns the CPU's model name on Linux, or "".
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
