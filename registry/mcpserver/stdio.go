package mcpserver

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxStderrLine is the longest stderr line logged as one record; longer
// lines are split.
const maxStderrLine = 64 << 10

// stdioTransport is an mcp.CommandTransport whose child writes its stderr
// to a pipe that the manager logs line by line.
type stdioTransport struct {
	cmd     *mcp.CommandTransport
	stderrW *os.File // the child's end, closed here once the child has it
}

func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.cmd.Connect(ctx)
	_ = t.stderrW.Close()
	return conn, err
}

// command prepares the server's process: orchestra's environment plus the
// configured one, its own process group that dies with orchestra, and
// stderr to the log.
func (s *server) command() (*stdioTransport, error) {
	cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
	cmd.Dir = s.cfg.Cwd
	cmd.Env = mergeEnv(os.Environ(), s.cfg.Env)
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
	return &stdioTransport{
		cmd:     &mcp.CommandTransport{Command: cmd, TerminateDuration: terminateGrace},
		stderrW: w,
	}, nil
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

// mergeEnv returns base with the variables of extra set, replacing
// variables of the same name.
func mergeEnv(base []string, extra map[string]string) []string {
	if len(extra) == 0 {
		return base
	}
	out := make([]string, 0, len(base)+len(extra))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := extra[k]; !ok {
			out = append(out, kv)
		}
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range extra {
			if !yield(k) {
				return
			}
		}
	}) {
		out = append(out, k+"="+extra[k])
	}
	return out
}
