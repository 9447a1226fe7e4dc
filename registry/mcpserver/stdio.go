package mcpserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxStderrLine is the longest stderr line logged as one record; longer
// lines are split.
const maxStderrLine = 64 << 10

// stdioTransport starts a server's process and talks to it over its
// stdin and stdout, like mcp.CommandTransport, but reads its stdout
// through a lineFilter; the child writes its stderr to a pipe that the
// manager logs line by line.
type stdioTransport struct {
	cmd     *exec.Cmd
	stderrW *os.File // the child's end, closed here once the child has it
	limit   int64    // the largest message, as Options.MaxResponseBytes
	notes   *notificationLimiter
	onDrop  func(reason string, sample []byte)
}

func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	defer t.stderrW.Close()
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	limit := t.limit
	if limit <= 0 {
		limit = mcp.DefaultMaxLineLength
	}
	return (&mcp.IOTransport{
		Reader:        newLineFilter(stdout, limit, t.notes, t.onDrop),
		Writer:        &procWriter{cmd: t.cmd, stdin: stdin, grace: terminateGrace},
		MaxLineLength: int(limit + frameSlack + 1),
	}).Connect(ctx)
}

// procWriter writes to a server's stdin; closing it ends the server as the
// MCP specification asks: close its stdin, wait, then SIGTERM, then
// SIGKILL.
type procWriter struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	grace time.Duration
}

func (w *procWriter) Write(p []byte) (int, error) { return w.stdin.Write(p) }

func (w *procWriter) Close() error {
	if err := w.stdin.Close(); err != nil {
		return fmt.Errorf("closing stdin: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- w.cmd.Wait() }()
	wait := func() (error, bool) {
		t := time.NewTimer(w.grace)
		defer t.Stop()
		select {
		case err := <-exited:
			return err, true
		case <-t.C:
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	if err := w.cmd.Process.Kill(); err != nil {
		return err
	}
	if err, ok := wait(); ok {
		return err
	}
	return errors.New("the server's process does not exit")
}

// command prepares the server's process: a minimal environment (see
// ServerConfig.environ), its own process group that dies with orchestra,
// and stderr to the log.
func (s *server) command() (*stdioTransport, error) {
	cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
	cmd.Dir = s.cfg.Cwd
	cmd.Env = s.cfg.environ(os.Environ(), ProcessDepth()+1)
	configureCmd(cmd)
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = w
	s.mu.Lock()
	s.stderr = append(s.stderr, r)
	s.mu.Unlock()
	s.m.io.Add(1)
	go func() {
		defer s.m.io.Done()
		s.logStderr(r)
		s.mu.Lock()
		s.stderr = slices.DeleteFunc(s.stderr, func(f *os.File) bool { return f == r })
		s.mu.Unlock()
		_ = r.Close()
	}()
	return &stdioTransport{cmd: cmd, stderrW: w, limit: s.m.opts.MaxResponseBytes, notes: s.notes(), onDrop: s.dropped()}, nil
}

// logStderr logs each line of r until EOF.
func (s *server) logStderr(r io.Reader) {
	br := bufio.NewReaderSize(r, 4096)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) && len(line) < maxStderrLine {
			continue
		}
		if text := strings.TrimRight(string(line), "\r\n"); text != "" {
			s.log.Info("server stderr", "line", text)
		}
		line = line[:0]
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// BaseEnv lists the variables of orchestra's environment that every stdio
// server gets: what programs need to run (PATH, HOME, the user, shell,
// terminal, temporary directory, time zone, locale, the XDG base
// directories, and their Windows counterparts), and nothing that usually
// holds a secret. ServerConfig's
// InheritEnv adds others, its Env sets values.
var BaseEnv = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "TZ", "LANG", "LANGUAGE", "LC_*", "XDG_*",
	"APPDATA", "COMSPEC", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATHEXT", "PROCESSOR_ARCHITECTURE",
	"PROGRAMFILES", "SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "TMP", "USERNAME", "USERPROFILE", "WINDIR",
}

// EnvDepth is the variable that tells an orchestra started as a stdio
// server how many orchestras it runs under.
const EnvDepth = "ORCHESTRA_DEPTH"

// ProcessDepth returns how many orchestras this process runs under, as a
// stdio server of one that runs as a stdio server of another...: 0 for an
// orchestra started otherwise.
func ProcessDepth() int {
	d, err := strconv.Atoi(os.Getenv(EnvDepth))
	if err != nil || d < 0 {
		return 0
	}
	return d
}

// environ returns the environment of the server's process: the variables
// of parent that BaseEnv and InheritEnv name, then Env, then EnvDepth set
// to depth.
func (c ServerConfig) environ(parent []string, depth int) []string {
	patterns := append(slices.Clone(BaseEnv), c.InheritEnv...)
	out := make([]string, 0, len(BaseEnv)+len(c.Env)+1)
	for _, kv := range parent {
		k, _, _ := strings.Cut(kv, "=")
		if _, set := c.Env[k]; set || k == EnvDepth {
			continue
		}
		for _, p := range patterns {
			if envMatch(p, k) {
				out = append(out, kv)
				break
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		out = append(out, k+"="+c.Env[k])
	}
	return append(out, EnvDepth+"="+strconv.Itoa(depth))
}

// envMatch reports whether the variable name matches pattern; on Windows,
// where names are not case-sensitive, in any case.
func envMatch(pattern, name string) bool {
	if runtime.GOOS == "windows" {
		pattern, name = strings.ToUpper(pattern), strings.ToUpper(name)
	}
	ok, _ := path.Match(pattern, name)
	return ok
}
