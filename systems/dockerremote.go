package systems

import (
	"context"
	"encoding/binary"
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

// CheckRemote checks that the named system runs on a remote Engine: every topology does.
func CheckRemote(system string) error {
	if !slices.Contains(Names(), system) {
		return fmt.Errorf("system %q on a remote Engine: the docker backend there runs %v: choose one of them, or drop --docker-host and DOCKER_HOST", system, Names())
	}
	if err := CheckBackend(system, BackendDocker); err != nil {
		return fmt.Errorf("on a remote Engine: %w (or drop --docker-host and DOCKER_HOST)", err)
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
// remote Engine; nodes are added with add.
func newRemote(ctx context.Context, cfg Config, bins []string, shim string, persist Persistence) (*dockerRemote, string, error) {
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
	b := &dockerRemote{session: s, shim: shim, log: cfg.Logger, host: host, tools: tools}
	b.table = newTable(b, shim, persist, cfg.Logger)
	return b, image, nil
}

// dockerRemote runs nodes (redis-server, sentinels, etcd members) in pods on a remote Engine, on
// the node table.
type dockerRemote struct {
	*table
	session *containers.Session
	shim    string
	log     *slog.Logger
	host    string
	// tools are the paths of sh, rm, iptables and lockpick (the queue reader) in the node image.
	tools map[string]string

	// queues number the paths slowed in the run (under a lock of their own).
	queues queueNums
}

// remoteHost is a node's pod on a remote Engine.
type remoteHost struct {
	b  *dockerRemote
	sp nodeSpec
	// env is the clock shim's environment, when the node runs with it.
	env []string
	// down: the node's container was killed (a node killed while paused) and must start first.
	down bool
	// shells are kept open in the node's container ([0]) and its holder ([1]): a kill or a clock
	// move is then a write on an open connection, not an exec of its own.
	mu     sync.Mutex
	shells [2]*containers.Shell
}

// In which container of the pod a script runs.
const (
	inNode = iota
	inHolder
)

// remoteHostOf is the pod of a node of the remote backend.
func remoteHostOf(n *tableNode) *remoteHost { return n.host.(*remoteHost) }

// sh runs script in the node's container or its holder.
func (b *dockerRemote) sh(ctx context.Context, n *tableNode, where int, script string) (string, error) {
	return remoteHostOf(n).sh(ctx, where, script)
}

// sh runs script in the node's container or its holder, through the shell kept open there (opened
// when there is none, or the last one ended with its container).
func (h *remoteHost) sh(ctx context.Context, where int, script string) (string, error) {
	h.mu.Lock()
	sh := h.shells[where]
	h.mu.Unlock()
	if sh == nil || sh.Dead() {
		open := h.b.session.OpenShell
		if where == inHolder {
			open = h.b.session.OpenNetShell
		}
		var err error
		if sh, err = open(ctx, h.sp.name, h.b.tools["sh"]); err != nil {
			return "", err
		}
		h.mu.Lock()
		h.shells[where] = sh
		h.mu.Unlock()
	}
	return sh.Run(ctx, script)
}

// closeShells ends the shells kept in the node's container, and in its holder with all.
func (h *remoteHost) closeShells(all bool) {
	h.mu.Lock()
	shells := []*containers.Shell{h.shells[inNode]}
	h.shells[inNode] = nil
	if all {
		shells = append(shells, h.shells[inHolder])
		h.shells[inHolder] = nil
	}
	h.mu.Unlock()
	for _, sh := range shells {
		if sh != nil {
			sh.Close()
		}
	}
}

// newHost implements runner: the node's pod (not started), called by other servers at its holder's
// address on the run's network. sp.dir is the node's directory in the run's store on this host,
// and the same path in its container; sp.port is published on the Engine host (startPods).
func (b *dockerRemote) newHost(ctx context.Context, sp nodeSpec) (host, place, error) {
	if err := os.MkdirAll(sp.dir, 0o755); err != nil {
		return nil, place{}, fmt.Errorf("node %s: %w", sp.name, err)
	}
	h := &remoteHost{b: b, sp: sp}
	if sp.shim && b.shim != "" {
		h.env = []string{"LD_PRELOAD=" + b.shim, ClockFileEnv + "=" + ClockFile(remoteClockDir)}
	}
	ip, err := b.session.CreatePod(ctx, sp.name, containers.PodSpec{
		Image: sp.image, Idle: sp.idle, Port: sp.port, PublishHost: b.host, Dir: sp.dir, ClockDir: remoteClockDir,
		ClockFile: filepath.Base(ClockFile(remoteClockDir)),
	})
	if err != nil {
		return nil, place{}, err
	}
	return h, place{peerIP: ip.String()}, nil
}

// timing implements runner.
func (b *dockerRemote) timing() (time.Duration, time.Duration) {
	return 20 * time.Second, 10 * time.Millisecond
}

func (b *dockerRemote) killFirst() bool { return false }

// startPods starts the nodes' pods together, not the nodes, and learns their published addresses.
func (b *dockerRemote) startPods(ctx context.Context, names []string) error {
	return together(names, func(name string) error { return b.startPod(ctx, name) })
}

// startPod starts a node's pod (not the node) and opens its kept shells.
func (b *dockerRemote) startPod(ctx context.Context, name string) error {
	n, err := b.node(name)
	if err != nil {
		return err
	}
	port, err := b.session.StartPod(ctx, name, n.spec.port)
	if err != nil {
		return err
	}
	b.setAddr(n, net.JoinHostPort(b.host, port))
	// The shells open now, so that the first fault does not wait for them.
	for _, where := range []int{inHolder, inNode} {
		if _, err := b.sh(ctx, n, where, ":"); err != nil {
			return err
		}
	}
	return nil
}

// published is where the harness and clients reach the node: the port its pod publishes.
func (b *dockerRemote) published(name string) string { return b.addrOf(name) }

// remoteProc is a server exec'd in a node's container on a remote Engine.
type remoteProc struct {
	session *containers.Session
	ex      containers.ExecID
}

// alive is false once the Engine says the exec ended; an Engine that does not answer says nothing.
func (p remoteProc) alive(ctx context.Context) bool {
	alive, err := p.session.Running(ctx, p.ex)
	return err != nil || alive
}

func (p remoteProc) pid() int { return 0 }

// prepare starts the node's container again if a kill took it, and removes the files of a start
// without data.
func (h *remoteHost) prepare(ctx context.Context, wipe []string) error {
	if h.down {
		if err := h.b.session.Start(ctx, h.sp.name); err != nil {
			return err
		}
		h.down = false
		// The container's shell went with it: a new one, before the next kill needs it.
		if _, err := h.sh(ctx, inNode, ":"); err != nil {
			return err
		}
	}
	if len(wipe) == 0 {
		return nil
	}
	rm := h.b.tools["rm"] + " -rf"
	for _, f := range wipe {
		rm += " " + shellQuote(f)
	}
	if _, err := h.sh(ctx, inNode, rm); err != nil {
		return fmt.Errorf("without data: %w", err)
	}
	return nil
}

// launch starts cmd so that it first records its pid in the container, then becomes the server
// (exec keeps the pid).
func (h *remoteHost) launch(ctx context.Context, cmd []string) (proc, error) {
	wrapped := append([]string{h.b.tools["sh"], "-c", `echo $$ >/tmp/node.pid && exec "$0" "$@"`}, cmd...)
	ex, err := h.b.session.ExecDetached(ctx, h.sp.name, wrapped, h.env, h.sp.dir)
	if err != nil {
		return nil, err
	}
	return remoteProc{session: h.b.session, ex: ex}, nil
}

func (h *remoteHost) log(ctx context.Context, file string) ([]byte, error) {
	return h.b.session.ReadFile(ctx, h.sp.name, filepath.Join(h.sp.dir, file))
}

// output is the last lines of the node's log.
func (h *remoteHost) output(ctx context.Context) string {
	data, err := h.log(ctx, logFileOf(h.sp))
	if err != nil {
		return err.Error()
	}
	return tail(string(data), 3)
}

// kill is `kill -9` in the node's container with the pid the node recorded; a paused node cannot
// be entered, so the Engine kills its whole container (thawing it after the signal, so the node
// dies without running another instruction).
func (h *remoteHost) kill(ctx context.Context, p proc, paused bool) error {
	if paused {
		h.closeShells(false)
		if err := h.b.session.KillContainer(ctx, h.sp.name); err != nil {
			return err
		}
		h.down = true
		return nil
	}
	if _, err := h.sh(ctx, inNode, `read p </tmp/node.pid && kill -9 "$p"`); err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		alive, err := h.b.session.Running(ctx, p.(remoteProc).ex)
		if err != nil {
			return err
		}
		if !alive {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still runs 10s after SIGKILL")
		}
	}
}

// signal: SIGSTOP and SIGCONT pause and continue the node's container; other signals go to the
// node with kill in its container.
func (h *remoteHost) signal(ctx context.Context, _ proc, sig syscall.Signal) error {
	switch sig {
	case syscall.SIGSTOP:
		return h.b.session.Pause(ctx, h.sp.name)
	case syscall.SIGCONT:
		return h.b.session.Unpause(ctx, h.sp.name)
	}
	_, err := h.sh(ctx, inNode, `read p </tmp/node.pid && kill -`+strconv.Itoa(int(sig))+` "$p"`)
	return err
}

// setClock stores the offset in place in the clock file the node's shim maps, by the shell kept in
// the holder (never paused, never killed), so it works in any state of the node, in about a
// millisecond.
func (h *remoteHost) setClock(ctx context.Context, offset time.Duration) error {
	// 1<> opens without truncating: the same file, the same pages the shim maps.
	_, err := h.sh(ctx, inHolder, `printf "`+octal(offset)+`" 1<>`+ClockFile(remoteClockDir))
	return err
}

// close implements runner: it stops the slowdowns still in place, copies each node's files (its
// log, its data) into the run's store, then removes every container and the network.
func (b *dockerRemote) close(ctx context.Context) error {
	if err := b.unslowAll(ctx); err != nil {
		b.log.Warn("a slowdown's reader goes with its holder", "err", err)
	}
	b.mu.Lock()
	nodes := make([]*tableNode, 0, len(b.nodes))
	for _, n := range b.nodes {
		nodes = append(nodes, n)
	}
	b.nodes = map[string]*tableNode{} // a second Close copies nothing
	b.mu.Unlock()
	for _, n := range nodes {
		remoteHostOf(n).closeShells(true)
	}
	for _, n := range nodes {
		if err := b.session.CopyOut(ctx, n.spec.name, n.spec.dir, n.spec.dir); err != nil {
			b.log.Warn("the node's files stay behind on the Engine's side, and go with its container", "node", n.spec.name, "err", err)
		}
	}
	return b.session.Close()
}

// redisIdle is the main process of a redis node's containers: a redis-server that stores nothing
// and listens on no TCP port.
func redisIdle(bin string) []string {
	return []string{bin, "--port", "0", "--unixsocket", "/tmp/idle.sock", "--save", "", "--appendonly", "no", "--dir", "/tmp"}
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

// RemoteNetToolsMissing says what this host lacks to cut the network of nodes on a remote Engine
// (iptables and its modules, packed into the node image), or nil. Nothing runs here as root.
func RemoteNetToolsMissing() error {
	if _, err := exec.LookPath("iptables"); err != nil {
		return fmt.Errorf("netcut on a remote Engine packs this host's iptables into the node image, and there is none: apt-get install iptables")
	}
	_, err := xtablesDir()
	return err
}
