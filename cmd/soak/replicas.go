package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/store"
	"github.com/orchestra-mcp/orchestra/testutil/pgtest"
)

// The replicas mode: a throw-away PostgreSQL cluster, two `orchestra serve
// --http --stateless` processes sharing its database, clients at both. One
// replica is SIGKILLed halfway; the other must keep serving, every answered
// run must be recorded as finished, and the killed replica's unfinished
// runs must become interrupted only once their lease lapsed.

// replicaOptions configure the replicas mode.
type replicaOptions struct {
	duration time.Duration // load before and after the kill, each
	clients  int           // per replica
	lease    time.Duration
	sleepMS  int // each run's downstream call, so that runs are in flight at the kill
	fixture  string
	root     string // the repository, where the binaries are built from; "" is the working directory
}

// replicaReport is what the replicas mode saw.
type replicaReport struct {
	answered         int // runs answered, both replicas
	answeredAfter    int // by the survivor after the kill
	recorded         int // answered runs found finished in the store
	missing          []string
	earlyInterrupted int // interrupted before the lease could lapse
	interrupted      int // interrupted in the end: the killed replica's runs in flight
	stillRunning     int
}

func (r *replicaReport) problems() []string {
	var p []string
	if len(r.missing) > 0 {
		p = append(p, fmt.Sprintf("%d answered runs are not recorded as finished, e.g. %s", len(r.missing), r.missing[0]))
	}
	if r.earlyInterrupted > 0 {
		p = append(p, fmt.Sprintf("%d runs were interrupted before the killed replica's lease lapsed", r.earlyInterrupted))
	}
	if r.interrupted == 0 {
		p = append(p, "no run of the killed replica was interrupted after its lease")
	}
	if r.stillRunning > 0 {
		p = append(p, fmt.Sprintf("%d runs are still running after the lease", r.stillRunning))
	}
	if r.answeredAfter == 0 {
		p = append(p, "the surviving replica answered nothing after the kill")
	}
	return p
}

func (r *replicaReport) print(w io.Writer) {
	fmt.Fprintf(w, "replicas: %d runs answered (%d by the survivor after the kill), %d recorded, %d missing, %d interrupted after the lease, %d early, %d still running\n",
		r.answered, r.answeredAfter, r.recorded, len(r.missing), r.interrupted, r.earlyInterrupted, r.stillRunning)
}

// soakReplicas runs the replicas mode.
func soakReplicas(ctx context.Context, o replicaOptions, stderr io.Writer) (*replicaReport, error) {
	dir, err := os.MkdirTemp("", "orchestra-replicas-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cluster, err := pgtest.Start(ctx)
	if err != nil {
		return nil, err
	}
	defer cluster.Stop()
	dbURL, err := cluster.CreateDatabase(ctx)
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "orchestra")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	build.Dir = o.root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building orchestra (run from the repository root): %v\n%s", err, out)
	}
	fixture := o.fixture
	if fixture == "" {
		fixture = filepath.Join(dir, "fixtureserver")
		build := exec.CommandContext(ctx, "go", "build", "-o", fixture, "./testdata/fixtureserver")
		build.Dir = o.root
		if out, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building the fixture server: %v\n%s", err, out)
		}
	}
	cfgPath := filepath.Join(dir, "orchestra.yaml")
	cfg := fmt.Sprintf("store:\n  url: %q\n  lease: %s\nmcpServers:\n  fx:\n    command: %q\nserver:\n  rate_limit:\n    requests_per_second: -1\n", dbURL, o.lease, fixture)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, err
	}

	var replicas [2]*replica
	for i := range replicas {
		r, err := startReplica(ctx, bin, cfgPath, stderr)
		if err != nil {
			return nil, err
		}
		defer r.stop()
		replicas[i] = r
	}

	var (
		mu       sync.Mutex
		answered []string
		after    atomic.Int64
		killed   atomic.Bool
	)
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, r := range replicas {
		for range o.clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cs, err := connectReplica(loadCtx, r.url)
				if err != nil {
					return
				}
				defer cs.Close()
				plan := map[string]any{"plan": map[string]any{"steps": []any{map[string]any{"tool": "fx__sleep", "arguments": map[string]any{"ms": o.sleepMS}}}}}
				for loadCtx.Err() == nil {
					res, err := cs.CallTool(loadCtx, &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: plan})
					if err != nil || res == nil {
						if i == 0 && killed.Load() {
							return // the killed replica
						}
						continue
					}
					var env struct {
						ID       string `json:"artifact_id"`
						Artifact struct {
							Success bool `json:"success"`
						} `json:"artifact"`
					}
					data, _ := json.Marshal(res.StructuredContent)
					if json.Unmarshal(data, &env) != nil || env.ID == "" {
						continue
					}
					mu.Lock()
					answered = append(answered, env.ID)
					mu.Unlock()
					if i == 1 && killed.Load() {
						after.Add(1)
					}
				}
			}()
		}
	}

	sleepCtx(ctx, o.duration)
	killedAt := time.Now()
	killed.Store(true)
	replicas[0].kill()
	fmt.Fprintf(stderr, "soak: replica 1 killed at %s\n", killedAt.Format(time.RFC3339Nano))

	// The lease outlives the kill by at least lease - lease/3 (the last
	// renewal came at most lease/3 before it): nothing may be interrupted
	// yet halfway through that.
	rep := &replicaReport{}
	sleepCtx(ctx, o.lease/3)
	reader, err := store.Open(ctx, dbURL, store.Options{Lease: o.lease})
	if err != nil {
		stopLoad()
		wg.Wait()
		return nil, err
	}
	defer reader.Close()
	if st, err := reader.Stats(ctx); err == nil {
		rep.earlyInterrupted = st.Runs[store.StatusInterrupted] + st.Recovered
	}
	rest := o.duration
	if min := o.lease * 2; rest < min {
		rest = min
	}
	sleepCtx(ctx, rest)
	stopLoad()
	wg.Wait()
	// The survivor's sweep runs every lease/3: give it one more.
	sleepCtx(ctx, o.lease/3+o.lease/10)

	mu.Lock()
	rep.answered = len(answered)
	mu.Unlock()
	rep.answeredAfter = int(after.Load())
	for _, id := range answered {
		run, _, err := reader.Get(ctx, id)
		if err != nil || run.Status == store.StatusRunning || run.Status == store.StatusInterrupted {
			rep.missing = append(rep.missing, id)
			continue
		}
		rep.recorded++
	}
	st, err := reader.Stats(ctx)
	if err != nil {
		return nil, err
	}
	rep.interrupted = st.Runs[store.StatusInterrupted]
	rep.stillRunning = st.Runs[store.StatusRunning]
	return rep, nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// replica is one orchestra serve process.
type replica struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
}

func startReplica(ctx context.Context, bin, cfg string, stderr io.Writer) (*replica, error) {
	cmd := exec.Command(bin, "serve", "--http", "127.0.0.1:0", "--stateless", "--config", cfg)
	cmd.Env = append(os.Environ(), "ORCHESTRA_CONFIG=")
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &replica{cmd: cmd, done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			if _, rest, ok := strings.Cut(line, "serving MCP at "); ok {
				select {
				case found <- strings.TrimSpace(rest):
				default:
				}
			}
		}
	}()
	go func() { cmd.Wait(); close(r.done) }()
	select {
	case r.url = <-found:
		return r, nil
	case <-r.done:
		return nil, errors.New("a replica exited while starting")
	case <-ctx.Done():
		r.kill()
		return nil, ctx.Err()
	}
}

func (r *replica) kill() {
	r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.done
}

func (r *replica) stop() {
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(15 * time.Second):
		r.kill()
	}
}

func connectReplica(ctx context.Context, url string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "soak-replicas", Version: "1"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
}
