package systems

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"
)

// The node table is the one node lifecycle every backend that runs nodes shares: a node is
// stopped, running or paused; it starts with or without its data and is waited for until it serves;
// it is killed, signalled, paused, and its clock moves. What differs between backends (a child
// process, a docker exec, an exec on a remote Engine) is a runner and the host it gives each node.

// nodeSpec is what a topology says of one node: how to run its server and how to know it serves.
type nodeSpec struct {
	name string
	// dir is the node's directory (absolute); its data, log and clock file live there.
	dir string
	// cmd is the server's program and arguments; wipedCmd, when set, replaces it on a start without
	// data after the first start (an etcd member that lost its data joins as an existing member).
	cmd, wipedCmd []string
	// env is added to the server's environment (the clock shim's is added by the host).
	env []string
	// data are the files a start without data removes; a configuration file is never among them
	// (Sentinel keeps its state there, and rewrites a replica's there).
	data []string
	// addr is the node's own address, when the topology knows it up front (the local backend).
	addr string
	// reserved holds a local node's port until its first start.
	reserved net.Listener
	// ready answers nil once the node serves; nil means a redis PING on the node's address.
	ready func(ctx context.Context) error
	// readyLog is what the node logs once it serves, which a start takes instead of ready while
	// the node is cut from the harness; empty means redis's.
	readyLog logLine
	// startWait, when longer than the runner's own bound, is how long a start may take until the
	// node serves (a JVM on a loaded machine takes over 10 s).
	startWait time.Duration
	// shim says whether the clock shim can move the server's clock (not a Go program's).
	shim bool
	// cred, when set, is the user a local node's server runs as (PostgreSQL refuses root).
	cred *syscall.Credential
	// group: a signal goes to the node's whole process group (a server that forks a process per
	// connection, whose pause must stop them all).
	group bool
	// image, idle, port and peerPort place the node in a container: its image, the container's
	// own process, where clients reach the server and where other servers call it.
	image          string
	idle           []string
	port, peerPort int
}

// logLine is a line a node writes to its log file (in its directory) once it serves.
type logLine struct{ file, text string }

// runner starts the hosts of a backend's nodes.
type runner interface {
	// newHost makes the node's place (its directory, its container) and returns its host and where it
	// is reached.
	newHost(ctx context.Context, sp nodeSpec) (host, place, error)
	// timing is how long a start may wait for its node, and how often it asks.
	timing() (wait, every time.Duration)
	// killFirst says whether the nodes must be killed before close: child processes must; a
	// container goes with its nodes.
	killFirst() bool
	// close removes what the runner made (containers, networks).
	close(ctx context.Context) error
}

// place is where a node is reached: its own address (empty until a remote pod is started), and the
// address other servers call it at (a container's; empty on the local backend).
type place struct{ addr, peerIP string }

// host is where one node's server runs.
type host interface {
	// prepare makes the host ready for a start, removing the files in wipe.
	prepare(ctx context.Context, wipe []string) error
	// launch starts cmd, with the node's environment and its directory as working directory.
	launch(ctx context.Context, cmd []string) (proc, error)
	// log is the content of a file of the node's directory.
	log(ctx context.Context, file string) ([]byte, error)
	// output is the end of what the node last wrote, for an error.
	output(ctx context.Context) string
	// kill kills the server of p (paused: its host was frozen) and waits until it is gone.
	kill(ctx context.Context, p proc, paused bool) error
	// signal sends sig to p; SIGSTOP and SIGCONT pause and continue the node.
	signal(ctx context.Context, p proc, sig syscall.Signal) error
	// setClock stores the node's clock offset, where its shim reads it.
	setClock(ctx context.Context, offset time.Duration) error
}

// proc is a server a host launched.
type proc interface {
	alive(ctx context.Context) bool
	pid() int
}

// nodeState is where a node is in its lifecycle.
type nodeState int

const (
	stopped nodeState = iota
	running
	paused
)

// tableNode is one node of the table.
type tableNode struct {
	spec nodeSpec
	addr string
	host host
	// peer is how other servers call the node, and the cuts and slowdowns of its paths to them
	// (the docker backends); guarded by op.
	peer dockerPeer
	// cut is the mode of the cut of the node from the harness in effect, or empty; guarded by op.
	cut string
	// op serialises what changes the node's state or its network: a heal that arrives while the
	// node starts waits until the start's process is in.
	op sync.Mutex

	// state, started and proc are guarded by the table's mu.
	state   nodeState
	started bool
	proc    proc
}

// table runs the nodes of a system on one runner: the Backend of every backend that runs nodes.
type table struct {
	r       runner
	shim    string
	persist Persistence
	log     *slog.Logger

	mu    sync.Mutex
	nodes map[string]*tableNode
	order []string
}

// newTable is a node table on r; persist "" keeps every node's data across restarts (etcd's).
func newTable(r runner, shim string, persist Persistence, log *slog.Logger) *table {
	return &table{r: r, shim: shim, persist: persist, log: log, nodes: map[string]*tableNode{}}
}

// add declares a node; it does not start it.
func (t *table) add(ctx context.Context, sp nodeSpec) (*tableNode, error) {
	h, pl, err := t.r.newHost(ctx, sp)
	if err != nil {
		return nil, err
	}
	n := &tableNode{spec: sp, addr: pl.addr, host: h,
		peer: dockerPeer{ip: pl.peerIP, port: sp.peerPort, cuts: map[string]string{}, slows: map[string]*peerSlow{}}}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nodes[sp.name] = n
	t.order = append(t.order, sp.name)
	return n, nil
}

func (t *table) node(name string) (*tableNode, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.nodes[name]
	if !ok {
		return nil, fmt.Errorf("no node %q", name)
	}
	return n, nil
}

func (t *table) nodePair(from, to string) (*tableNode, *tableNode, error) {
	f, err := t.node(from)
	if err != nil {
		return nil, nil, err
	}
	to2, err := t.node(to)
	return f, to2, err
}

// addrOf is a node's own address, or "".
func (t *table) addrOf(name string) string {
	n, err := t.node(name)
	if err != nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return n.addr
}

// setAddr sets a node's own address once it is known (a remote pod's published port).
func (t *table) setAddr(n *tableNode, addr string) {
	t.mu.Lock()
	n.addr = addr
	t.mu.Unlock()
}

// setCmd sets a node's command lines (once every address they name is known).
func (t *table) setCmd(name string, cmd, wiped []string) {
	if n, err := t.node(name); err == nil {
		n.op.Lock()
		n.spec.cmd, n.spec.wipedCmd = cmd, wiped
		n.op.Unlock()
	}
}

// Start implements Backend.
func (t *table) Start(ctx context.Context, name string) error {
	// Without persistence a replica still stores the snapshot it synced from: a restart loses it.
	return t.start(ctx, name, t.persist == PersistNone)
}

// StartEmpty implements Backend.
func (t *table) StartEmpty(ctx context.Context, name string) error { return t.start(ctx, name, true) }

func (t *table) start(ctx context.Context, name string, wipe bool) error {
	n, err := t.node(name)
	if err != nil {
		return err
	}
	began := time.Now()
	p, mark, err := t.launch(ctx, n, wipe)
	if err != nil {
		return err
	}
	if err := t.waitReady(ctx, n, p, mark); err != nil {
		t.Kill(name)
		return err
	}
	t.log.Debug("node started", "node", name, "addr", n.addr, "pid", p.pid(), "took", time.Since(began))
	return nil
}

// launch starts the node's server under its op, and returns it and the count of ready lines in
// its log before it (or -1 when the node is not cut).
func (t *table) launch(ctx context.Context, n *tableNode, wipe bool) (proc, int, error) {
	n.op.Lock()
	defer n.op.Unlock()
	cmd, err := t.claim(n, wipe)
	if err != nil {
		return nil, 0, err
	}
	p, mark, err := t.prepareAndLaunch(ctx, n, wipe, cmd)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		n.state = stopped
		return nil, 0, err
	}
	n.proc, n.started = p, true
	return p, mark, nil
}

// claim marks a stopped node running and picks its command line; a running node is refused.
func (t *table) claim(n *tableNode, wipe bool) ([]string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n.state != stopped {
		return nil, fmt.Errorf("node %s is already running", n.spec.name)
	}
	n.state = running
	if wipe && n.started && n.spec.wipedCmd != nil {
		return n.spec.wipedCmd, nil
	}
	return n.spec.cmd, nil
}

// prepareAndLaunch readies the host (without the node's data on a wipe: nothing may survive a
// restart without data, a stale dump would make it a lie), counts the ready lines of a cut node's
// log (a cut node cannot be asked: its log says when it is ready; -1 when not cut), and launches.
func (t *table) prepareAndLaunch(ctx context.Context, n *tableNode, wipe bool, cmd []string) (proc, int, error) {
	var files []string
	if wipe {
		files = n.spec.data
	}
	if err := n.host.prepare(ctx, files); err != nil {
		return nil, 0, fmt.Errorf("start node %s: %w", n.spec.name, err)
	}
	mark := -1
	if n.cut != "" {
		mark = t.readyLines(ctx, n)
	}
	p, err := n.host.launch(ctx, cmd)
	return p, mark, err
}

// readyLog is the line the node's log shows once it serves.
func (n *tableNode) readyLog() logLine {
	if n.spec.readyLog.file == "" {
		return logLine{file: "redis.log", text: readyLine}
	}
	return n.spec.readyLog
}

// readyLines counts the lines of the node's log that say it is ready.
func (t *table) readyLines(ctx context.Context, n *tableNode) int {
	l := n.readyLog()
	data, err := n.host.log(ctx, l.file)
	if err != nil {
		return 0
	}
	return bytes.Count(data, []byte(l.text))
}

// waitReady waits until the node answers (its own check, or PING) or, when it is cut (mark >= 0),
// until its log holds more ready lines than mark.
func (t *table) waitReady(ctx context.Context, n *tableNode, p proc, mark int) error {
	wait, every := t.r.timing()
	wait = max(wait, n.spec.startWait)
	deadline := time.Now().Add(wait)
	for {
		err := t.isReady(ctx, n)
		if err == nil || (mark >= 0 && t.readyLines(ctx, n) > mark) {
			return nil
		}
		if !p.alive(ctx) {
			return StartFailure(n.spec.name, n.host.output(ctx))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s (at %s) did not answer within %v: %w; its output: %s", n.spec.name, n.addr, wait, err, n.host.output(ctx))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s: %w", n.spec.name, ctx.Err())
		case <-time.After(every):
		}
	}
}

func (t *table) isReady(ctx context.Context, n *tableNode) error {
	if n.spec.ready != nil {
		return n.spec.ready(ctx)
	}
	return PingOnce(ctx, n.addr)
}

// Kill implements Backend.
func (t *table) Kill(name string) error {
	n, err := t.node(name)
	if err != nil {
		return err
	}
	n.op.Lock()
	defer n.op.Unlock()
	return t.kill(n)
}

// kill is Kill with the node's op held.
func (t *table) kill(n *tableNode) error {
	t.mu.Lock()
	state, p := n.state, n.proc
	n.state = stopped
	t.mu.Unlock()
	if state == stopped || p == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.host.kill(ctx, p, state == paused); err != nil {
		return fmt.Errorf("kill node %s: %w", n.spec.name, err)
	}
	t.log.Debug("node killed", "node", n.spec.name, "pid", p.pid())
	return nil
}

// Running implements Backend.
func (t *table) Running(name string) bool {
	n, err := t.node(name)
	if err != nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return n.state != stopped
}

// Pid is a running node's process id (in its host), or 0.
func (t *table) Pid(name string) int {
	n, err := t.node(name)
	if err != nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if n.state == stopped || n.proc == nil {
		return 0
	}
	return n.proc.pid()
}

// Signal implements Backend.
func (t *table) Signal(name string, sig syscall.Signal) error {
	n, err := t.node(name)
	if err != nil {
		return err
	}
	n.op.Lock()
	defer n.op.Unlock()
	t.mu.Lock()
	state, p := n.state, n.proc
	t.mu.Unlock()
	if state == stopped {
		return fmt.Errorf("node %s is not running", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.host.signal(ctx, p, sig); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch sig {
	case syscall.SIGSTOP:
		n.state = paused
	case syscall.SIGCONT:
		n.state = running
	}
	return nil
}

// ClockShim implements Backend.
func (t *table) ClockShim() bool { return t.shim != "" }

// SetClockOffset implements Backend. It works whether the node runs or not.
func (t *table) SetClockOffset(name string, offset time.Duration) error {
	n, err := t.node(name)
	if err != nil {
		return err
	}
	if t.shim == "" || !n.spec.shim {
		return fmt.Errorf("node %s runs without the clock shim: its clock cannot be moved", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.host.setClock(ctx, offset); err != nil {
		return fmt.Errorf("set clock of %s: %w", name, err)
	}
	return nil
}

// ClockOffset implements Backend: the node's TIME against the midpoint of the shortest of three
// round trips.
func (t *table) ClockOffset(name string) (time.Duration, error) {
	n, err := t.node(name)
	if err != nil {
		return 0, err
	}
	off, err := MeasureClockOffset(n.addr)
	if err != nil {
		return 0, fmt.Errorf("measure clock of %s: %w", name, err)
	}
	return off, nil
}

// Close kills every node, the last declared first, then lets the runner remove what it made.
func (t *table) Close() error {
	t.mu.Lock()
	order := append([]string(nil), t.order...)
	for _, n := range t.nodes {
		if n.spec.reserved != nil {
			n.spec.reserved.Close()
		}
	}
	t.mu.Unlock()
	var errs []error
	for i := len(order) - 1; t.r.killFirst() && i >= 0; i-- {
		errs = append(errs, t.Kill(order[i]))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return errors.Join(append(errs, t.r.close(ctx))...)
}

// startTogether starts the named nodes at once (a container takes the Engine a second or more).
func (t *table) startTogether(ctx context.Context, names []string) error {
	return together(names, func(name string) error { return t.Start(ctx, name) })
}

// together calls f with every name at once, and joins their errors.
func together(names []string, f func(name string) error) error {
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { errs[i] = f(name) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// cutRulesFunc adds (op -A) or deletes (-D) the rules of a cut of mode in a node's namespace.
type cutRulesFunc func(ctx context.Context, n *tableNode, op, mode string) error

// cutNetwork cuts a node from the harness and its clients with apply, and records the cut (a
// node restarted while cut is still cut; its start then waits for its log to say it is ready).
func (t *table) cutNetwork(ctx context.Context, node, mode string, apply cutRulesFunc) error {
	n, err := t.node(node)
	if err != nil {
		return err
	}
	n.op.Lock()
	defer n.op.Unlock()
	if n.cut != "" {
		return fmt.Errorf("node %s is already cut", node)
	}
	n.cut = mode
	return apply(ctx, n, "-A", mode)
}

// healNetwork removes a node's cut, if any, with apply.
func (t *table) healNetwork(ctx context.Context, node string, apply cutRulesFunc) error {
	n, err := t.node(node)
	if err != nil {
		return err
	}
	n.op.Lock()
	defer n.op.Unlock()
	mode := n.cut
	n.cut = ""
	if mode == "" {
		return nil
	}
	return apply(ctx, n, "-D", mode)
}
