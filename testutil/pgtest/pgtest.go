// Package pgtest starts throw-away PostgreSQL clusters for tests: initdb in a
// temporary directory, postgres listening on a Unix socket there only, and
// a fresh database for each caller. It uses the server binaries of the
// machine's PostgreSQL (Debian's postgresql package puts them in
// /usr/lib/postgresql/VERSION/bin); as root, the cluster runs as the user
// postgres, since PostgreSQL refuses to run as root.
//
// Tests that need PostgreSQL call [URL], which skips them when PostgreSQL is
// not installed, unless ORCHESTRA_REQUIRE_POSTGRES=1 (set by CI), which
// makes that a failure. A package's TestMain calls [Stop] after m.Run:
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		pgtest.Stop()
//		os.Exit(code)
//	}
package pgtest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// RequireEnv names the variable that turns a missing PostgreSQL into a test
// failure rather than a skip.
const RequireEnv = "ORCHESTRA_REQUIRE_POSTGRES"

// Cluster is a running throw-away PostgreSQL cluster.
type Cluster struct {
	dir  string // holds the data directory and the socket
	cmd  *exec.Cmd
	done chan struct{}
	log  *logTail
}

// BinDir returns the directory of the PostgreSQL server binaries, or an
// error when PostgreSQL is not installed.
func BinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("PostgreSQL is not installed (no initdb in /usr/lib/postgresql/*/bin or PATH): apt-get install postgresql")
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// Start initialises and starts a cluster in a new temporary directory.
// Stop it with [Cluster.Stop].
func Start(ctx context.Context) (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	// A short path: the socket's must fit in 107 bytes.
	dir, err := os.MkdirTemp("", "pgtest")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, done: make(chan struct{}), log: &logTail{}}
	cred, err := credential(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	c.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-k", dir,
		"-c", "listen_addresses=", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=300", "-c", "shared_buffers=32MB")
	c.cmd.SysProcAttr = sysProcAttr(cred)
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting postgres: %w", err)
	}
	ready := make(chan struct{})
	go c.log.follow(stderr, "database system is ready to accept connections", ready)
	go func() { c.cmd.Wait(); close(c.done) }()
	select {
	case <-ready:
		return c, nil
	case <-c.done:
		os.RemoveAll(dir)
		return nil, fmt.Errorf("postgres exited while starting: %s", c.log)
	case <-ctx.Done():
		c.Stop()
		return nil, ctx.Err()
	}
}

// credential returns the user the cluster runs as: nil (this process's)
// unless this process is root, then postgres, who is given dir.
func credential(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running PostgreSQL as root is refused, and there is no user postgres to run it as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// URL returns the URL of database name in the cluster.
func (c *Cluster) URL(name string) string {
	return "postgres://postgres@/" + url.PathEscape(name) + "?host=" + url.QueryEscape(c.dir) + "&sslmode=disable"
}

// CreateDatabase creates a new empty database with a random name and
// returns its URL.
func (c *Cluster) CreateDatabase(ctx context.Context) (string, error) {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return "", fmt.Errorf("connecting to the test cluster: %w", err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("creating a test database: %w", err)
	}
	return c.URL(name), nil
}

// Stop shuts the cluster down at once and removes its directory.
func (c *Cluster) Stop() error {
	c.cmd.Process.Signal(syscall.SIGQUIT) // immediate shutdown: nothing here needs to last
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
	}
	return os.RemoveAll(c.dir)
}

var shared struct {
	sync.Mutex
	c   *Cluster
	err error
}

// URL returns the URL of a new empty database in this process's cluster,
// started on first use. It skips t when PostgreSQL is not installed, or
// fails it when ORCHESTRA_REQUIRE_POSTGRES=1.
func URL(t testing.TB) string {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	if shared.c == nil && shared.err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		shared.c, shared.err = Start(ctx)
		cancel()
	}
	if shared.err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("PostgreSQL is required (%s=1): %v", RequireEnv, shared.err)
		}
		t.Skipf("PostgreSQL unavailable: %v", shared.err)
	}
	u, err := shared.c.CreateDatabase(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Stop stops this process's cluster, if URL started one.
func Stop() {
	shared.Lock()
	defer shared.Unlock()
	if shared.c != nil {
		shared.c.Stop()
		shared.c = nil
	}
}

// logTail keeps the last lines postgres logged, to explain a failure.
type logTail struct {
	mu    sync.Mutex
	lines []string
}

func (l *logTail) follow(r io.Reader, readyLine string, ready chan<- struct{}) {
	sc := bufio.NewScanner(r)
	signalled := false
	for sc.Scan() {
		line := sc.Text()
		l.mu.Lock()
		l.lines = append(l.lines, line)
		if len(l.lines) > 20 {
			l.lines = l.lines[1:]
		}
		l.mu.Unlock()
		if !signalled && strings.Contains(line, readyLine) {
			signalled = true
			close(ready)
		}
	}
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
