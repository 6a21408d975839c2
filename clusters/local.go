// Package clusters runs the nodes of the cluster under test.
//
// Local runs redis-server nodes as foreground child processes on loopback. Each node lives in its own
// process group with a parent-death signal, so no node outlives the harness however the harness ends.
package clusters

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Persistence is how a node keeps its data across a restart.
type Persistence string

// Persistence settings.
const (
	// PersistNone keeps nothing: a restarted node comes back empty.
	PersistNone Persistence = "none"
	// PersistAOFEverysec appends every write and fsyncs once a second.
	PersistAOFEverysec Persistence = "aof-everysec"
	// PersistAOFAlways appends and fsyncs every write before replying.
	PersistAOFAlways Persistence = "aof-always"
)

// ParsePersistence checks a persistence name.
func ParsePersistence(s string) (Persistence, error) {
	switch p := Persistence(s); p {
	case PersistNone, PersistAOFEverysec, PersistAOFAlways:
		return p, nil
	}
	return "", fmt.Errorf("unknown persistence %q: use none, aof-everysec or aof-always", s)
}

// ErrRedisMissing means no redis-server binary could be found.
var ErrRedisMissing = errors.New("redis-server not found: install it with `apt-get install redis-server` (or set --redis-server to its path)")

// Config describes a local cluster.
type Config struct {
	// Nodes is how many redis-server nodes to run.
	Nodes int
	// Dir holds one subdirectory per node (its data and its log).
	Dir string
	// BasePort, when not zero, puts node i on BasePort+i; zero picks free ports.
	BasePort int
	// Persistence applies to every node.
	Persistence Persistence
	// RedisServer is the redis-server binary; empty looks it up on PATH. Its base name must stay
	// redis-server: Redis picks its mode from argv[0].
	RedisServer string
	// Logger receives node lifecycle messages; nil discards them.
	Logger *slog.Logger
	// ClockShim, when set, is the clock shim library (see FindClockShim) every node is started with
	// through LD_PRELOAD, each reading its offset from clock.offset in its own directory. That file
	// outlives restarts: a node whose clock was wrong comes back with the same wrong clock.
	ClockShim string
	// NamePrefix names the nodes: prefix1, prefix2, ...; empty means "n". The harness runs the
	// counter workload's resource as a one-node cluster named r1.
	NamePrefix string
}

// Node is one redis-server of a local cluster.
type Node struct {
	Name string
	Port int
	Dir  string

	cmd    *exec.Cmd
	exited chan struct{}
	starts int
}

// Addr is the node's loopback address.
func (n *Node) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.Port)) }

// Admin opens a client straight to the node, bypassing every link: the harness's own connection.
func (n *Node) Admin() *redis.Client { return AdminClient(n.Addr()) }

// AdminClient opens a client to addr that never retries a command and dials once, so the harness
// sees a dead node at once instead of through go-redis's back-off.
func AdminClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: addr, MaxRetries: -1, DialerRetries: 1, PoolSize: 2, DisableIdentity: true, Protocol: 2,
		ContextTimeoutEnabled: true, // a caller's deadline bounds reads too, as readiness polls need
	})
}

// Local is a cluster of redis-server child processes.
type Local struct {
	cfg    Config
	binary string
	log    *slog.Logger

	mu     sync.Mutex
	nodes  []*Node
	byName map[string]*Node
}

// FindRedisServer resolves the redis-server binary to an absolute path, or returns ErrRedisMissing.
func FindRedisServer(path string) (string, error) {
	if path == "" {
		path = "redis-server"
	}
	p, err := exec.LookPath(path)
	if err != nil {
		return "", ErrRedisMissing
	}
	// Absolute, but not through EvalSymlinks: Redis picks its mode from argv[0], and Debian's
	// redis-server is a symlink to redis-check-rdb.
	return filepath.Abs(p)
}

// StartLocal starts every node and waits until each answers PING. On error, nothing is left running.
func StartLocal(ctx context.Context, cfg Config) (*Local, error) {
	if cfg.Nodes < 1 {
		return nil, fmt.Errorf("a cluster needs at least one node, got %d", cfg.Nodes)
	}
	if cfg.Persistence == "" {
		cfg.Persistence = PersistNone
	}
	bin, err := FindRedisServer(cfg.RedisServer)
	if err != nil {
		return nil, err
	}
	// Every path a node sees is absolute: a node runs with its own directory as working directory,
	// so a relative path would be read from the wrong place (or refused: redis-server cannot chdir
	// into "store/run/nodes/n1" from inside that very directory).
	if cfg.Dir, err = filepath.Abs(cfg.Dir); err != nil {
		return nil, fmt.Errorf("node directory: %w", err)
	}
	if cfg.ClockShim != "" {
		if cfg.ClockShim, err = filepath.Abs(cfg.ClockShim); err != nil {
			return nil, fmt.Errorf("clock shim: %w", err)
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Local{cfg: cfg, binary: bin, log: log, byName: map[string]*Node{}}
	ports, err := choosePorts(cfg.Nodes, cfg.BasePort)
	if err != nil {
		return nil, err
	}
	if cfg.NamePrefix == "" {
		cfg.NamePrefix = "n"
	}
	for i := range cfg.Nodes {
		name := fmt.Sprintf("%s%d", cfg.NamePrefix, i+1)
		n := &Node{Name: name, Port: ports[i], Dir: filepath.Join(cfg.Dir, name)}
		if err := os.MkdirAll(n.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		if cfg.ClockShim != "" {
			if err := initClockFile(n.clockFile()); err != nil {
				return nil, fmt.Errorf("node %s: %w", n.Name, err)
			}
		}
		c.nodes = append(c.nodes, n)
		c.byName[n.Name] = n
	}
	for _, n := range c.nodes {
		if err := c.start(ctx, n); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// choosePorts returns count ports: BasePort.. when given (each must be free), else free ports the
// kernel picks. A free port can still be taken before redis binds it; start reports that clearly.
func choosePorts(count, base int) ([]int, error) {
	ports := make([]int, 0, count)
	if base != 0 {
		if base < 1024 || base+count-1 > 65535 {
			return nil, fmt.Errorf("--base-port %d: the ports %d..%d must lie in 1024..65535", base, base, base+count-1)
		}
		for i := range count {
			p := base + i
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				return nil, fmt.Errorf("port %d is in use: choose another --base-port, or omit it to use free ports", p)
			}
			l.Close()
			ports = append(ports, p)
		}
		return ports, nil
	}
	ls, err := ReservePorts(count)
	if err != nil {
		return nil, err
	}
	for _, l := range ls {
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
		l.Close()
	}
	return ports, nil
}

// Nodes lists the nodes in order.
func (c *Local) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Node(nil), c.nodes...)
}

// Node returns the node with the given name.
func (c *Local) Node(name string) (*Node, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.byName[name]
	if !ok {
		return nil, fmt.Errorf("no node %q", name)
	}
	return n, nil
}

func (c *Local) args(n *Node) []string {
	return RedisArgs("127.0.0.1", n.Port, n.Dir, c.cfg.Persistence)
}

// RedisArgs is the command line of a redis-server node listening on bind:port, with dir as its
// working directory (an absolute path: its data and its log live there) and persistence p.
func RedisArgs(bind string, port int, dir string, p Persistence) []string {
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", bind,
		"--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"),
		"--daemonize", "no",
		"--protected-mode", "no",
		"--save", "",
		"--appendfilename", "appendonly.aof",
	}
	switch p {
	case PersistNone:
		args = append(args, "--appendonly", "no")
	case PersistAOFEverysec:
		args = append(args, "--appendonly", "yes", "--appendfsync", "everysec")
	case PersistAOFAlways:
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	}
	return args
}

// start launches n and waits until it answers PING.
func (c *Local) start(ctx context.Context, n *Node) error {
	c.mu.Lock()
	if n.cmd != nil {
		c.mu.Unlock()
		return fmt.Errorf("node %s is already running", n.Name)
	}
	if c.cfg.Persistence == PersistNone {
		// Nothing may survive a restart: a stale dump would make the restart a lie.
		os.Remove(filepath.Join(n.Dir, "dump.rdb"))
		os.RemoveAll(filepath.Join(n.Dir, "appendonlydir"))
	}
	cmd := exec.Command(c.binary, c.args(n)...)
	cmd.Dir = n.Dir
	if c.cfg.ClockShim != "" {
		cmd.Env = append(os.Environ(), "LD_PRELOAD="+c.cfg.ClockShim, ClockFileEnv+"="+n.clockFile())
	}
	// Own process group: a terminal's Ctrl-C reaches the harness, which heals and stops the nodes
	// itself. Pdeathsig: the kernel kills the node if the harness dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := os.OpenFile(filepath.Join(n.Dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.mu.Unlock()
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	// Where this start's output begins in each log, so a failed start is reported with its own lines.
	marks := n.logMarks()
	if err := cmd.Start(); err != nil {
		out.Close()
		c.mu.Unlock()
		return fmt.Errorf("start node %s: %w", n.Name, err)
	}
	n.cmd = cmd
	n.starts++
	exited := make(chan struct{})
	n.exited = exited
	c.mu.Unlock()
	go func() {
		cmd.Wait()
		out.Close()
		close(exited)
	}()
	c.log.Debug("node started", "node", n.Name, "port", n.Port, "pid", cmd.Process.Pid)
	if err := waitReady(ctx, n, exited, marks); err != nil {
		c.Kill(n.Name)
		return err
	}
	return nil
}

func waitReady(ctx context.Context, n *Node, exited <-chan struct{}, marks []logMark) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := PingOnce(ctx, n.Addr())
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return StartFailure(fmt.Sprintf("%s (port %d)", n.Name, n.Port), startOutput(marks))
		case <-ctx.Done():
			return fmt.Errorf("node %s: %w", n.Name, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s did not answer PING within 10s: %w", n.Name, err)
		}
	}
}

// PingOnce asks addr for PONG on a fresh connection. A fresh client each time: a go-redis pool that
// saw a refused dial backs off for a second, which would add that second to every restart.
func PingOnce(ctx context.Context, addr string) error {
	rc := AdminClient(addr)
	defer rc.Close()
	pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	return rc.Ping(pctx).Err()
}

// logMark is a node log and its size before a start: what follows is that start's output.
type logMark struct {
	path string
	size int64
}

func (n *Node) logFile() string { return filepath.Join(n.Dir, "redis.log") }

// logMarks marks the node's two logs: stdout.log takes what redis-server prints before it opens its
// log file (a bad argument, a directory it cannot enter), redis.log the rest (a port in use).
func (n *Node) logMarks() []logMark {
	var marks []logMark
	for _, p := range []string{filepath.Join(n.Dir, "stdout.log"), n.logFile()} {
		var size int64
		if st, err := os.Stat(p); err == nil {
			size = st.Size()
		}
		marks = append(marks, logMark{path: p, size: size})
	}
	return marks
}

// startLines bounds how much of a failed start's output an error quotes.
const startLines = 3

// startOutput quotes the last lines a failed start wrote to the node's logs, and names the files.
func startOutput(marks []logMark) string {
	var parts, files []string
	for _, m := range marks {
		files = append(files, m.path)
		b, err := os.ReadFile(m.path)
		if err != nil || int64(len(b)) <= m.size {
			continue
		}
		if lines := lastLines(string(b[m.size:]), startLines); lines != "" {
			parts = append(parts, lines)
		}
	}
	if len(parts) == 0 {
		return "it wrote nothing (see " + strings.Join(files, ", ") + ")"
	}
	return strings.Join(parts, " | ") + " (see " + strings.Join(files, ", ") + ")"
}

// lastLines returns the last n non-empty lines of s, joined by " | " so an error stays one line.
func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	lines = lines[max(0, len(lines)-n):]
	return strings.Join(lines, " | ")
}

// Start restarts a stopped node and waits until it is ready. With PersistNone it comes back empty.
func (c *Local) Start(ctx context.Context, name string) error {
	n, err := c.Node(name)
	if err != nil {
		return err
	}
	return c.start(ctx, n)
}

// Kill sends SIGKILL to a node and waits for it to exit. Killing a stopped node does nothing.
func (c *Local) Kill(name string) error {
	n, err := c.Node(name)
	if err != nil {
		return err
	}
	c.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.cmd = nil
	c.mu.Unlock()
	if cmd == nil {
		return nil
	}
	// Kill the whole group: nothing the node forked (an AOF rewrite child) may survive it.
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill node %s: %w", n.Name, err)
	}
	<-exited
	c.log.Debug("node killed", "node", n.Name)
	return nil
}

// Signal sends sig to a running node's process.
func (c *Local) Signal(name string, sig syscall.Signal) error {
	n, err := c.Node(name)
	if err != nil {
		return err
	}
	c.mu.Lock()
	cmd := n.cmd
	c.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("node %s is not running", name)
	}
	return cmd.Process.Signal(sig)
}

// Running reports whether a node's process is up.
func (c *Local) Running(name string) bool {
	n, err := c.Node(name)
	if err != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return n.cmd != nil
}

// Pid returns a running node's process id, or 0.
func (c *Local) Pid(name string) int {
	n, err := c.Node(name)
	if err != nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Close kills every node. It is safe to call more than once.
func (c *Local) Close() error {
	var errs []error
	for _, n := range c.Nodes() {
		if err := c.Kill(n.Name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
