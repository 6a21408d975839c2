package systems

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockpick-dev/lockpick/clusters"
	"github.com/lockpick-dev/lockpick/containers"
)

// The docker backend on a remote Engine (tcp://) shares nothing with this host but the
// Engine's API, so every node operation goes through it (containers.PodSpec says how a node is
// laid out):
//   - the node's files live in its container (its log is copied into the run's store at the end);
//   - the harness reaches each node at the port its pod publishes on the Engine host;
//   - start is an exec of the server in the node's container that first records its pid there,
//     kill a `kill -9` of that pid from a shell kept open in the container (a node killed while
//     paused: the Engine kills the container, thawing it after the signal, and the next start
//     starts the container again);
//   - pause is `docker pause` of the node's container (the network holder keeps running);
//   - the clock file sits in a volume of the holder that the node's container shares: the shim maps
//     it, and the harness stores the new offset in place with printf from a shell kept in the
//     holder, which works when the node runs, is paused or is down;
//   - a cut, of the node from clients or of its paths to other servers, is iptables in the holder,
//     in the node's network namespace.

// remoteSystems are the systems the docker backend runs on a remote Engine.
var remoteSystems = []string{"redis-masters", "redis-sentinel", "etcd"}

// CheckRemote checks that the named system runs on a remote Engine.
func CheckRemote(system string) error {
	if !slices.Contains(remoteSystems, system) {
		return fmt.Errorf("system %q on a remote Engine: the docker backend there runs %v: choose one of them, or drop --docker-host and DOCKER_HOST", system, remoteSystems)
	}
	return nil
}

// remoteClockDir is the volume of the holder that the node's container shares for its clock file.
const remoteClockDir = "/lockpick-clock"

// remoteTools are the programs a remote node image holds besides the server and the shim: a shell
// for the node's pid file and the clock, rm for a start without data; iptables, for cuts, is
// packed when this host has it (netcut is refused without it, see RemoteNetToolsMissing).
var remoteTools = []string{"sh", "rm"}

// xtablesExtensions are the iptables modules the cuts use (the standard target, TCP and REJECT).
var xtablesExtensions = []string{"libxt_standard.so", "libxt_tcp.so", "libipt_REJECT.so", "libxt_NFQUEUE.so"}

// remoteNode is one node of a remote docker backend.
type remoteNode struct {
	name, dir, addr string
	cmd, env        []string
	running, paused bool
	// down: the node's container was killed (a node killed while paused) and must start first.
	down bool
	ex   containers.ExecID
	cut  string
	// started: the node ran once (a start without data then takes wipedCmd, when set).
	started bool
	// wipedCmd, data, ready and readyLog are as dockerNode's; peer is how other servers reach the
	// node (its holder's address on the run's network), and the cuts of its paths to them.
	wipedCmd []string
	data     []string
	ready    func(ctx context.Context) error
	readyLog logLine
	port     int
	peer     dockerPeer
	op       sync.Mutex
	// shells are kept open in the node's container ([0]) and its holder ([1]): a kill or a clock
	// move is then a write on an open connection, not an exec of its own.
	shells [2]*containers.Shell
}

// In which container of the pod a script runs.
const (
	inNode = iota
	inHolder
)

// sh runs script in the node's container or its holder, through the shell kept open there (opened
// when there is none, or the last one ended with its container).
func (b *dockerRemote) sh(ctx context.Context, n *remoteNode, where int, script string) (string, error) {
	b.mu.Lock()
	sh := n.shells[where]
	b.mu.Unlock()
	if sh == nil || sh.Dead() {
		open := b.session.OpenShell
		if where == inHolder {
			open = b.session.OpenNetShell
		}
		var err error
		if sh, err = open(ctx, n.name, b.tools["sh"]); err != nil {
			return "", err
		}
		b.mu.Lock()
		n.shells[where] = sh
		b.mu.Unlock()
	}
	return sh.Run(ctx, script)
}

// closeShell ends the shell kept in the node's container (its container is going).
func (b *dockerRemote) closeShell(n *remoteNode) {
	b.mu.Lock()
	sh := n.shells[inNode]
	n.shells[inNode] = nil
	b.mu.Unlock()
	if sh != nil {
		sh.Close()
	}
}

// dockerRemote runs nodes (redis-server, sentinels, etcd members) in pods on a remote Engine.
type dockerRemote struct {
	session *containers.Session
	shim    string
	persist clusters.Persistence
	log     *slog.Logger
	host    string
	// tools are the paths of sh, rm, iptables and lockpick (the queue reader) in the node image.
	tools map[string]string

	mu    sync.Mutex
	nodes map[string]*remoteNode

	// queues number the paths slowed in the run (under a lock of their own).
	queues queueNums
}

// remoteImageFiles are the host files of a remote node image: the servers, the shim, the tools, the
// iptables modules, which iptables opens itself (ldd does not list them), and lockpick's own binary,
// the reader of a slowed path's queue. tools are the tools' paths, the same in the image.
func remoteImageFiles(bins []string, shim string) (files []string, tools map[string]string, err error) {
	files = slices.Clone(bins)
	if shim != "" {
		files = append(files, shim)
	}
	tools = map[string]string{}
	for _, t := range remoteTools {
		p, err := exec.LookPath(t)
		if err != nil {
			return nil, nil, fmt.Errorf("the docker backend on a remote Engine packs %s into the node image, and this host has none: install it (apt-get install coreutils dash)", t)
		}
		tools[t] = p
		files = append(files, p)
	}
	if RemoteNetToolsMissing() != nil {
		return files, tools, nil
	}
	tools["iptables"], _ = exec.LookPath("iptables")
	dir, _ := xtablesDir()
	files = append(files, tools["iptables"])
	for _, x := range xtablesExtensions {
		files = append(files, filepath.Join(dir, x))
	}
	if tools["lockpick"], err = exe(); err != nil {
		return nil, nil, err
	}
	return append(files, tools["lockpick"]), tools, nil
}

// xtablesDir is where this host's iptables keeps its modules.
func xtablesDir() (string, error) {
	for _, pat := range []string{"/usr/lib/*/xtables", "/usr/lib/xtables", "/usr/lib64/xtables", "/lib/*/xtables"} {
		found, _ := filepath.Glob(filepath.Join(pat, xtablesExtensions[0]))
		if len(found) > 0 {
			return filepath.Dir(found[0]), nil
		}
	}
	return "", fmt.Errorf("the docker backend on a remote Engine packs iptables and its modules (%s) into the node image, and this host has none: apt-get install iptables", xtablesExtensions[0])
}

// newRemote builds the image of bins (and the shim, the tools) and opens the run's session on a
// remote Engine; nodes are added with addPod.
func newRemote(ctx context.Context, cfg Config, bins []string, shim string, persist clusters.Persistence) (*dockerRemote, string, error) {
	files, tools, err := remoteImageFiles(bins, shim)
	if err != nil {
		return nil, "", err
	}
	image, err := cfg.Docker.Engine.NodeImage(ctx, files)
	if err != nil {
		return nil, "", err
	}
	host := cfg.Docker.PublishHost
	if host == "" {
		if host, err = cfg.Docker.Engine.PublishHost(); err != nil {
			return nil, "", err
		}
	}
	s, err := cfg.Docker.Engine.NewSession(ctx, cfg.Docker.Run)
	if err != nil {
		return nil, "", err
	}
	return &dockerRemote{session: s, shim: shim, persist: persist, log: cfg.Logger,
		host: host, tools: tools, nodes: map[string]*remoteNode{}}, image, nil
}

// startMastersRemote runs redis-masters in pods on a remote Engine.
func startMastersRemote(ctx context.Context, cfg Config, dir string) (_ System, err error) {
	bin, err := clusters.FindRedisServer(cfg.RedisServer)
	if err != nil {
		return nil, err
	}
	b, image, err := newRemote(ctx, cfg, []string{bin}, cfg.ClockShim, persistence(cfg.Persistence))
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	names := make([]string, cfg.Nodes)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i+1)
		nd := filepath.Join(dir, names[i])
		if _, err := b.addPod(ctx, dockerSpec{name: names[i], dir: nd, image: image, idle: redisIdle(bin), port: redisPort,
			cmd:  append([]string{bin}, clusters.RedisArgs("0.0.0.0", redisPort, nd, b.persist)...),
			data: []string{filepath.Join(nd, "dump.rdb"), filepath.Join(nd, "appendonlydir")}, shim: true}); err != nil {
			return nil, err
		}
	}
	if err := b.startPods(ctx, names); err != nil {
		return nil, fmt.Errorf("start redis-masters on the Docker Engine at %s: %w", cfg.Docker.Engine.Host(), err)
	}
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { errs[i] = b.Start(ctx, name) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("start redis-masters on the Docker Engine at %s: %w", cfg.Docker.Engine.Host(), err)
	}
	nodes := make([]Node, len(names))
	for i, name := range names {
		n, _ := b.node(name)
		nodes[i] = Node{Name: name, Role: RoleMaster, Addr: n.addr, Data: true}
	}
	return newMasters(b, nodes, cfg.Groups, cfg.Direct)
}

// redisIdle is the main process of a redis node's containers: a redis-server that stores nothing
// and listens on no TCP port.
func redisIdle(bin string) []string {
	return []string{bin, "--port", "0", "--unixsocket", "/tmp/idle.sock", "--save", "", "--appendonly", "no", "--dir", "/tmp"}
}

// addPod creates the pod of a node (not started) and returns its address on the run's network,
// where other servers call it. sp.dir is the node's directory in the run's store on this host,
// and the same path in its container; sp.port is published on the Engine host.
func (b *dockerRemote) addPod(ctx context.Context, sp dockerSpec) (string, error) {
	if err := os.MkdirAll(sp.dir, 0o755); err != nil {
		return "", fmt.Errorf("node %s: %w", sp.name, err)
	}
	var env []string
	if sp.shim && b.shim != "" {
		env = []string{"LD_PRELOAD=" + b.shim, clusters.ClockFileEnv + "=" + clockFile(remoteClockDir)}
	}
	ip, err := b.session.CreatePod(ctx, sp.name, containers.PodSpec{
		Image: sp.image, Idle: sp.idle, Port: sp.port, PublishHost: b.host, Dir: sp.dir, ClockDir: remoteClockDir,
		ClockFile: filepath.Base(clockFile(remoteClockDir)),
	})
	if err != nil {
		return "", err
	}
	n := &remoteNode{name: sp.name, dir: sp.dir, env: env, data: sp.data, ready: sp.ready, readyLog: sp.readyLog,
		port: sp.port, peer: dockerPeer{ip: ip.String(), port: sp.peerPort, cuts: map[string]string{}, slows: map[string]*peerSlow{}}}
	n.setCmd(b.tools["sh"], sp.cmd, sp.wipedCmd)
	b.mu.Lock()
	b.nodes[sp.name] = n
	b.mu.Unlock()
	return net.JoinHostPort(ip.String(), strconv.Itoa(sp.port)), nil
}

// setCmd sets the node's command lines: each records its pid in the container before it becomes
// the server (exec keeps the pid).
func (n *remoteNode) setCmd(sh string, cmd, wiped []string) {
	wrap := func(c []string) []string {
		if c == nil {
			return nil
		}
		return append([]string{sh, "-c", `echo $$ >/tmp/node.pid && exec "$0" "$@"`}, c...)
	}
	n.cmd, n.wipedCmd = wrap(cmd), wrap(wiped)
}

// startPods starts the nodes' pods together, not the nodes, and learns their published addresses.
func (b *dockerRemote) startPods(ctx context.Context, names []string) error {
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { errs[i] = b.startPod(ctx, name) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startPod starts a node's pod (not the node) and opens its kept shells.
func (b *dockerRemote) startPod(ctx context.Context, name string) error {
	n, err := b.node(name)
	if err != nil {
		return err
	}
	port, err := b.session.StartPod(ctx, name, n.port)
	if err != nil {
		return err
	}
	b.mu.Lock()
	n.addr = net.JoinHostPort(b.host, port)
	b.mu.Unlock()
	// The shells open now, so that the first fault does not wait for them.
	for _, where := range []int{inHolder, inNode} {
		if _, err := b.sh(ctx, n, where, ":"); err != nil {
			return err
		}
	}
	return nil
}

// published is where the harness and clients reach the node: the port its pod publishes.
func (b *dockerRemote) published(name string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n, ok := b.nodes[name]; ok {
		return n.addr
	}
	return ""
}

func (b *dockerRemote) node(name string) (*remoteNode, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, ok := b.nodes[name]
	if !ok {
		return nil, fmt.Errorf("no node %q", name)
	}
	return n, nil
}

// Start implements Backend.
func (b *dockerRemote) Start(ctx context.Context, name string) error {
	// Without persistence a replica still stores the snapshot it synced from: a restart loses it.
	return b.start(ctx, name, b.persist == clusters.PersistNone)
}

// StartEmpty implements Backend.
func (b *dockerRemote) StartEmpty(ctx context.Context, name string) error {
	return b.start(ctx, name, true)
}

func (b *dockerRemote) start(ctx context.Context, name string, wipe bool) error {
	n, err := b.node(name)
	if err != nil {
		return err
	}
	n.op.Lock()
	defer n.op.Unlock()
	b.mu.Lock()
	if n.running {
		b.mu.Unlock()
		return fmt.Errorf("node %s is already running", name)
	}
	down, cut := n.down, n.cut
	cmd := n.cmd
	if wipe && n.started && n.wipedCmd != nil {
		cmd = n.wipedCmd
	}
	b.mu.Unlock()
	began := time.Now()
	if down {
		if err := b.session.Start(ctx, name); err != nil {
			return err
		}
		b.mu.Lock()
		n.down = false
		b.mu.Unlock()
	}
	if wipe && len(n.data) > 0 {
		rm := b.tools["rm"] + " -rf"
		for _, f := range n.data {
			rm += " " + shellQuote(f)
		}
		if _, err := b.sh(ctx, n, inNode, rm); err != nil {
			return fmt.Errorf("start node %s without data: %w", name, err)
		}
	}
	mark := -1 // a cut node cannot be asked: its log says when it is ready
	if cut != "" {
		mark = b.readyLines(ctx, n)
	}
	ex, err := b.session.ExecDetached(ctx, name, cmd, n.env, n.dir)
	if err != nil {
		return err
	}
	b.mu.Lock()
	n.running, n.ex, n.started = true, ex, true
	b.mu.Unlock()
	if err := b.waitReady(ctx, n, ex, mark); err != nil {
		b.kill(n)
		return err
	}
	if down {
		// The container's shell went with it: a new one, before the next kill needs it.
		if _, err := b.sh(ctx, n, inNode, ":"); err != nil {
			return err
		}
	}
	b.log.Debug("node started", "node", name, "addr", n.addr, "took", time.Since(began))
	return nil
}

// logFile is the node's log, which says when it serves.
func (n *remoteNode) logFile() logLine {
	if n.readyLog.file == "" {
		return logLine{file: "redis.log", text: readyLine}
	}
	return n.readyLog
}

// readyLines counts the lines of the node's log that say it is ready.
func (b *dockerRemote) readyLines(ctx context.Context, n *remoteNode) int {
	l := n.logFile()
	data, err := b.session.ReadFile(ctx, n.name, filepath.Join(n.dir, l.file))
	if err != nil {
		return 0
	}
	return bytes.Count(data, []byte(l.text))
}

// waitReady waits until the node answers (its own check, or PING) or, when it is cut (mark >= 0),
// until its log holds more ready lines than mark.
func (b *dockerRemote) waitReady(ctx context.Context, n *remoteNode, ex containers.ExecID, mark int) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		var err error
		if n.ready != nil {
			err = n.ready(ctx)
		} else {
			err = clusters.PingOnce(ctx, n.addr)
		}
		if err == nil || (mark >= 0 && b.readyLines(ctx, n) > mark) {
			return nil
		}
		if alive, ierr := b.session.Running(ctx, ex); ierr == nil && !alive {
			return fmt.Errorf("node %s exited during start-up: %s", n.name, b.lastLines(ctx, n))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s (published at %s) did not answer within 20s: %v; its log: %s", n.name, n.addr, err, b.lastLines(ctx, n))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s: %w", n.name, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// lastLines are the last lines of the node's log, for an error.
func (b *dockerRemote) lastLines(ctx context.Context, n *remoteNode) string {
	data, err := b.session.ReadFile(ctx, n.name, filepath.Join(n.dir, n.logFile().file))
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " | ")
}

// Kill implements Backend: `kill -9` in the node's container with the pid the node recorded; a
// paused node cannot be entered, so the Engine kills its whole container (thawing it after the
// signal, so the node dies without running another instruction).
func (b *dockerRemote) Kill(name string) error {
	n, err := b.node(name)
	if err != nil {
		return err
	}
	n.op.Lock()
	defer n.op.Unlock()
	return b.kill(n)
}

// kill is Kill with the node's op held.
func (b *dockerRemote) kill(n *remoteNode) error {
	name := n.name
	b.mu.Lock()
	running, paused, ex := n.running, n.paused, n.ex
	n.running, n.paused = false, false
	b.mu.Unlock()
	if !running {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if paused {
		b.closeShell(n)
		if err := b.session.KillContainer(ctx, name); err != nil {
			return fmt.Errorf("kill node %s: %w", name, err)
		}
		b.mu.Lock()
		n.down = true
		b.mu.Unlock()
		return nil
	}
	if _, err := b.sh(ctx, n, inNode, `read p </tmp/node.pid && kill -9 "$p"`); err != nil {
		return fmt.Errorf("kill node %s: %w", name, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		alive, err := b.session.Running(ctx, ex)
		if err != nil {
			return fmt.Errorf("kill node %s: %w", name, err)
		}
		if !alive {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s still runs 10s after SIGKILL", name)
		}
	}
}

// Running implements Backend.
func (b *dockerRemote) Running(name string) bool {
	n, err := b.node(name)
	if err != nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return n.running
}

// Signal implements Backend: SIGSTOP and SIGCONT pause and continue the node's container; other
// signals go to the node with kill in its container.
func (b *dockerRemote) Signal(name string, sig syscall.Signal) error {
	n, err := b.node(name)
	if err != nil {
		return err
	}
	n.op.Lock()
	defer n.op.Unlock()
	b.mu.Lock()
	running := n.running
	b.mu.Unlock()
	if !running {
		return fmt.Errorf("node %s is not running", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch sig {
	case syscall.SIGSTOP:
		err = b.session.Pause(ctx, name)
	case syscall.SIGCONT:
		err = b.session.Unpause(ctx, name)
	default:
		_, err = b.sh(ctx, n, inNode, `read p </tmp/node.pid && kill -`+strconv.Itoa(int(sig))+` "$p"`)
		return err
	}
	if err == nil {
		b.mu.Lock()
		n.paused = sig == syscall.SIGSTOP
		b.mu.Unlock()
	}
	return err
}

// ClockShim implements Backend.
func (b *dockerRemote) ClockShim() bool { return b.shim != "" }

// SetClockOffset implements Backend: the offset is stored in place in the clock file the node's
// shim maps, by the shell kept in the holder (never paused, never killed), so it works in any
// state of the node, in about a millisecond.
func (b *dockerRemote) SetClockOffset(name string, offset time.Duration) error {
	n, err := b.node(name)
	if err != nil {
		return err
	}
	if b.shim == "" {
		return fmt.Errorf("node %s runs without the clock shim: its clock cannot be moved", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// 1<> opens without truncating: the same file, the same pages the shim maps.
	script := `printf "` + octal(offset) + `" 1<>` + clockFile(remoteClockDir)
	if _, err := b.sh(ctx, n, inHolder, script); err != nil {
		return fmt.Errorf("set clock of %s: %w", name, err)
	}
	return nil
}

// shellQuote quotes s for sh: a store's path may hold spaces or quotes.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// octal is an offset as the file holds it (a native-endian int64, little-endian on the hosts
// lockpick builds for) in printf's octal escapes.
func octal(offset time.Duration) string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(offset))
	var s strings.Builder
	for _, c := range b {
		fmt.Fprintf(&s, `\%03o`, c)
	}
	return s.String()
}

// ClockOffset implements Backend.
func (b *dockerRemote) ClockOffset(name string) (time.Duration, error) {
	n, err := b.node(name)
	if err != nil {
		return 0, err
	}
	off, err := clusters.MeasureClockOffset(n.addr)
	if err != nil {
		return 0, fmt.Errorf("measure clock of %s: %w", name, err)
	}
	return off, nil
}

// Close stops the slowdowns still in place, copies each node's files (its log, its data) into the
// run's store, then removes every container and the network.
func (b *dockerRemote) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.unslowAll(ctx); err != nil {
		b.log.Warn("a slowdown's reader goes with its holder", "err", err)
	}
	b.mu.Lock()
	nodes := make([]*remoteNode, 0, len(b.nodes))
	for _, n := range b.nodes {
		nodes = append(nodes, n)
	}
	b.nodes = map[string]*remoteNode{} // a second Close copies nothing
	var shells []*containers.Shell
	for _, n := range nodes {
		for _, sh := range n.shells {
			if sh != nil {
				shells = append(shells, sh)
			}
		}
	}
	b.mu.Unlock()
	for _, sh := range shells {
		sh.Close()
	}
	for _, n := range nodes {
		if err := b.session.CopyOut(ctx, n.name, n.dir, n.dir); err != nil {
			b.log.Warn("the node's files stay behind on the Engine's side, and go with its container", "node", n.name, "err", err)
		}
	}
	return b.session.Close()
}

// RemoteNetToolsMissing says what this host lacks to cut the network of nodes on a remote Engine
// (iptables and its modules, packed into the node image), or nil. Nothing runs here as root.
func RemoteNetToolsMissing() error {
	if _, err := exec.LookPath("iptables"); err != nil {
		return fmt.Errorf("netcut on a remote Engine packs this host's iptables into the node image, and there is none: apt-get install iptables")
	}
	_, err := xtablesDir()
	return err
}
