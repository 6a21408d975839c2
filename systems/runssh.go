package systems

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockpick-dev/lockpick/sshhost"
)

// The ssh backend runs each node's server on a host of the user's, as Jepsen does: lockpick drives
// the hosts over one SSH connection each, and needs nothing there but sshd, the server's program
// and the tools every Debian host has (sh, kill, ps, iptables for cuts). Per run and host:
//   - a directory SSHBaseDir/HOST/RUN holds a directory per node (its data, log, clock file) and
//     the clock shim, uploaded when a fault moves clocks; it is removed at the end, after every
//     node's logs are copied into the run's store;
//   - a node is its server started detached in a session of its own (setsid), its pid the group's;
//     kill is SIGKILL to the group, pause SIGSTOP/SIGCONT to it;
//   - a node's clock moves as the shim reads it: 8 bytes written in place into the file it maps;
//   - a cut is iptables rules on the host, tagged with the run's comment, scoped to the node's
//     port, so the SSH connection itself is never cut; the close removes every rule of the tag.
// A killed lockpick leaves the servers, rules and files behind: lockpick clean --backend ssh finds
// them by the directory (a process whose working directory lies under SSHBaseDir/HOST) and the
// comment, and removes them.

// BackendSSH runs nodes on the user's hosts over SSH.
const BackendSSH = "ssh"

// SSHBaseDir is where the ssh backend keeps its files on each host, one directory per host address
// (test hosts in network namespaces share one file system) and run under it.
const SSHBaseDir = "/tmp/lockpick-ssh"

// SSHRuleTag begins the comment of every iptables rule the ssh backend adds on a host.
const SSHRuleTag = "lockpick-ssh:"

// sshFirstPort is the first port of the nodes on each host: a host's k-th node listens on
// sshFirstPort+k.
const sshFirstPort = 17001

// SSHPeerPortOffset is how far above its port a node on a host listens for its peers, when its
// server has a port of its own for them (an etcd member's peer URL).
const SSHPeerPortOffset = 1000

// SSHConfig is how a system runs on hosts over SSH.
type SSHConfig struct {
	// Hosts are the hosts (host or host:port of their sshd); nodes are placed round-robin on them.
	Hosts []string
	User  string
	// Key is the private key to log in with; KnownHosts, or Fingerprints (one per host, in the
	// order of Hosts), check the hosts' keys.
	Key, KnownHosts string
	Fingerprints    []string
	// Run names the run: its directory on each host, and the comment of its rules.
	Run string
	// Lockpick is lockpick's own binary, uploaded to every host to read the packet queues of
	// slowed paths between servers and to move the hosts' clocks; empty when the run does neither.
	Lockpick string
	// HostClock allows moving the hosts' real clocks: HostClockOwn, HostClockShared, or "" (not).
	HostClock string
}

// Dial logs in to one host of c.
func (c SSHConfig) Dial(ctx context.Context, addr string) (*sshhost.Host, error) {
	fp := ""
	if i := slices.Index(c.Hosts, addr); i >= 0 && i < len(c.Fingerprints) {
		fp = c.Fingerprints[i]
	}
	return sshhost.Dial(ctx, sshhost.Config{Addr: addr, User: c.User, KeyFile: c.Key, KnownHosts: c.KnownHosts, Fingerprint: fp})
}

// SSHHostDir is the directory of a host's files under SSHBaseDir.
func SSHHostDir(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		h = addr
	}
	return path.Join(SSHBaseDir, safeName(h))
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// safeName is s with every character a path or a comment must not hold replaced by "_".
func safeName(s string) string { return unsafeChars.ReplaceAllString(s, "_") }

// sshMachine is one host of a run: its connection, its address, the run's directory there, where
// the harness is seen from, and the ports its nodes took.
type sshMachine struct {
	h *sshhost.Host
	// name is the host as the user gave it, without the sshd port; it is where nodes are reached.
	name    string
	dir     string
	control string
	shim    string
	// lockpick is lockpick's binary on the host, when uploaded (SSHConfig.Lockpick).
	lockpick string
	nodes    int
	// bootID names the host's kernel, when its clock may move (SSHConfig.HostClock).
	bootID string
}

// sshRunner runs a run's nodes on its hosts, on the node table.
type sshRunner struct {
	*table
	cfg      SSHConfig
	localDir string
	log      *slog.Logger
	machines []*sshMachine

	amu    sync.Mutex
	placed map[string]sshPlace
	queues queueNums
}

// sshPlace is where one node runs: its host and port.
type sshPlace struct {
	m    *sshMachine
	port int
}

// openSSH logs in to every host, checks that each has server (a program name, found on its PATH),
// makes the run's directory there and uploads the clock shim (when set).
func openSSH(ctx context.Context, cfg SSHConfig, localDir, server, shim string, persist Persistence, log *slog.Logger) (*sshRunner, error) {
	if len(cfg.Hosts) == 0 {
		return nil, errors.New("--backend ssh needs the hosts to run the nodes on: add --hosts HOST[,HOST...]")
	}
	r := &sshRunner{cfg: cfg, localDir: localDir, log: log, placed: map[string]sshPlace{}}
	r.machines = make([]*sshMachine, len(cfg.Hosts))
	err := together(cfg.Hosts, func(addr string) error {
		m, err := r.openMachine(ctx, addr, server, shim)
		if err != nil {
			return err
		}
		for i, a := range cfg.Hosts {
			if a == addr {
				r.machines[i] = m
			}
		}
		return nil
	})
	if err == nil && cfg.HostClock != "" {
		if err = r.checkHostClocks(ctx); err != nil {
			// Refused before anything ran: nothing of the run may stay on the hosts.
			for _, m := range r.machines {
				err = errors.Join(err, removeRunDir(context.WithoutCancel(ctx), m))
			}
		}
	}
	if err != nil {
		r.closeMachines(ctx)
		return nil, err
	}
	r.table = newTable(r, shim, persist, log)
	return r, nil
}

// openMachine logs in to one host and prepares the run's directory there.
func (r *sshRunner) openMachine(ctx context.Context, addr, server, shim string) (*sshMachine, error) {
	h, err := r.cfg.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	name, _, err := net.SplitHostPort(addr)
	if err != nil {
		name = addr
	}
	m := &sshMachine{h: h, name: name, dir: path.Join(SSHHostDir(addr), safeName(r.cfg.Run))}
	// Shells kept open now: the nodes' starts and the first faults do not wait for them.
	if err := h.Warm(4); err != nil {
		h.Close()
		return nil, err
	}
	if m.control, err = seenFrom(ctx, h); err != nil {
		h.Close()
		return nil, err
	}
	if _, err := h.Sh(ctx, "command -v "+sshhost.Quote(server)); err != nil {
		h.Close()
		return nil, fmt.Errorf("host %s has no %s on its PATH: install it there (apt-get install %s)", addr, server, debianPackage(server))
	}
	// A killed run's servers hold the ports and its rules cut them: say so rather than fail later.
	if left, err := survey(ctx, h, addr); err != nil || left.Count() > 0 {
		h.Close()
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("host %s holds what an earlier run left (%s), or another run is going there: when none is, remove it with lockpick clean --backend ssh --hosts %s", addr, left, strings.Join(r.cfg.Hosts, ","))
	}
	if _, err := h.Sh(ctx, "mkdir -p "+sshhost.Quote(m.dir)); err != nil {
		h.Close()
		return nil, fmt.Errorf("host %s: make the run's directory: %w", addr, err)
	}
	if shim != "" {
		if err := r.uploadShim(ctx, m, shim); err != nil {
			h.Close()
			return nil, err
		}
	}
	if r.cfg.Lockpick != "" {
		if err := r.uploadLockpick(ctx, m, r.cfg.Lockpick); err != nil {
			h.Close()
			return nil, err
		}
	}
	if r.cfg.HostClock != "" {
		if err := readBootID(ctx, m); err != nil {
			h.Close()
			return nil, err
		}
	}
	return m, nil
}

// seenFrom is the address the host sees this machine at: its sshd's SSH_CONNECTION, not this
// side's address, which a NAT between them would change (and a cut of it would cut nothing).
func seenFrom(ctx context.Context, h *sshhost.Host) (string, error) {
	out, err := h.Sh(ctx, `echo "$SSH_CONNECTION"`)
	if err != nil {
		return "", err
	}
	f := strings.Fields(string(out))
	if len(f) == 0 || net.ParseIP(f[0]) == nil {
		return h.LocalIP(), nil
	}
	return f[0], nil
}

// uploadShim copies the clock shim into the run's directory on m.
func (r *sshRunner) uploadShim(ctx context.Context, m *sshMachine, shim string) error {
	f, err := os.Open(shim)
	if err != nil {
		return fmt.Errorf("clock shim: %w", err)
	}
	defer f.Close()
	m.shim = path.Join(m.dir, filepath.Base(shim))
	if err := m.h.Upload(ctx, m.shim, 0o755, f); err != nil {
		return fmt.Errorf("host %s: upload the clock shim: %w", m.name, err)
	}
	return nil
}

// debianPackage is the Debian package of a server program.
func debianPackage(server string) string {
	if server == "etcd" {
		return "etcd-server"
	}
	return server
}

// PlacedNode is a node as the ssh backend places it on a host.
type PlacedNode struct {
	Name string
	Port int
}

// PlaceOnHosts places nodes on hosts as a run of the ssh backend does (round-robin, in order), by
// host.
func PlaceOnHosts(hosts []string, nodes []Node) map[string][]PlacedNode {
	out := map[string][]PlacedNode{}
	for i, n := range nodes {
		h := hosts[i%len(hosts)]
		out[h] = append(out[h], PlacedNode{Name: n.Name, Port: sshFirstPort + len(out[h])})
	}
	return out
}

// place assigns a node its host (round-robin, in the order nodes are first placed) and port.
func (r *sshRunner) place(name string) sshPlace {
	r.amu.Lock()
	defer r.amu.Unlock()
	if p, ok := r.placed[name]; ok {
		return p
	}
	m := r.machines[len(r.placed)%len(r.machines)]
	p := sshPlace{m: m, port: sshFirstPort + m.nodes}
	m.nodes++
	r.placed[name] = p
	return p
}

// peerPort is the port a node on a host listens for its peers on, when it has one of its own.
func (r *sshRunner) peerPort(name string) int { return r.place(name).port + SSHPeerPortOffset }

// nodeDir is a node's directory on its host.
func (r *sshRunner) nodeDir(name string) string { return path.Join(r.place(name).m.dir, name) }

// writeFile writes a file of a node's directory on its host (its configuration).
func (r *sshRunner) writeFile(ctx context.Context, name, file string, body []byte) error {
	m := r.place(name).m
	if err := m.h.Upload(ctx, file, 0o644, bytes.NewReader(body)); err != nil {
		return fmt.Errorf("node %s: write %s on %s: %w", name, file, m.name, err)
	}
	return nil
}

// addr is where a node is reached: its host and port.
func (r *sshRunner) addr(name string) string {
	p := r.place(name)
	return net.JoinHostPort(p.m.name, strconv.Itoa(p.port))
}

// newHost implements runner: the node's directory on its host, with a zero clock file when the
// node runs with the shim.
func (r *sshRunner) newHost(ctx context.Context, sp nodeSpec) (host, place, error) {
	p := r.place(sp.name)
	h := &sshNode{r: r, m: p.m, sp: sp, port: p.port, local: filepath.Join(r.localDir, sp.name)}
	if err := os.MkdirAll(h.local, 0o755); err != nil {
		return nil, place{}, fmt.Errorf("node %s: %w", sp.name, err)
	}
	script := "mkdir -p " + sshhost.Quote(sp.dir)
	if sp.shim && p.m.shim != "" {
		clock := ClockFile(sp.dir)
		script += fmt.Sprintf(" && { [ -e %s ] || printf '%s' >%s; }", sshhost.Quote(clock), octal(0), sshhost.Quote(clock))
		h.env = []string{"LD_PRELOAD=" + p.m.shim, ClockFileEnv + "=" + clock}
	}
	if _, err := p.m.h.Sh(ctx, script); err != nil {
		return nil, place{}, fmt.Errorf("node %s on %s: %w", sp.name, p.m.name, err)
	}
	return h, place{addr: r.addr(sp.name), peerIP: p.m.name}, nil
}

// timing implements runner: each question is a round trip over SSH.
func (r *sshRunner) timing() (time.Duration, time.Duration) {
	return 20 * time.Second, 10 * time.Millisecond
}

// killFirst implements runner: a server on a host outlives everything but its kill.
func (r *sshRunner) killFirst() bool { return true }

// close implements runner: it removes the run's rules on every host, copies every node's logs
// into the run's store, removes the run's directories and logs out.
func (r *sshRunner) close(ctx context.Context) error {
	r.mu.Lock()
	nodes := make([]*tableNode, 0, len(r.nodes))
	for _, n := range r.nodes {
		nodes = append(nodes, n)
	}
	r.mu.Unlock()
	// The readers of slowed paths first: their rules go with them, and their counts are logged.
	// Then the hosts' clocks, from their records, before the directories holding them go.
	errs := []error{r.unslowAll(ctx), r.restoreHostClocks(ctx)}
	for _, n := range nodes {
		if err := n.host.(*sshNode).fetchLogs(ctx); err != nil {
			r.log.Warn("a node's logs could not be copied", "node", n.spec.name, "err", err)
		}
	}
	for _, m := range r.machines {
		if m == nil {
			continue
		}
		if err := r.removeRules(ctx, m); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, removeRunDir(ctx, m))
	}
	r.closeMachines(ctx)
	return errors.Join(errs...)
}

// removeRunDir removes the run's directory on m, and the host's once no other run uses it (rmdir
// fails on a non-empty one).
func removeRunDir(ctx context.Context, m *sshMachine) error {
	rm := fmt.Sprintf("rm -rf %s && { rmdir %s %s 2>/dev/null || true; }", sshhost.Quote(m.dir), sshhost.Quote(path.Dir(m.dir)), SSHBaseDir)
	if _, err := m.h.Sh(ctx, rm); err != nil {
		return fmt.Errorf("host %s: remove the run's directory: %w", m.name, err)
	}
	return nil
}

func (r *sshRunner) closeMachines(context.Context) {
	for _, m := range r.machines {
		if m != nil {
			m.h.Close()
		}
	}
}

// ruleTag is the comment of the run's rules.
func (r *sshRunner) ruleTag() string { return SSHRuleTag + safeName(r.cfg.Run) }

// removeRules deletes every rule of the run's tag on m, whoever added it.
func (r *sshRunner) removeRules(ctx context.Context, m *sshMachine) error {
	if _, err := m.h.Sh(ctx, deleteRulesScript(grepComment(r.ruleTag(), false))); err != nil {
		return fmt.Errorf("host %s: remove the run's firewall rules: %w", m.name, err)
	}
	return nil
}

// deleteRulesScript deletes every filter rule that grep (grepComment's) finds.
func deleteRulesScript(grep string) string {
	return `command -v iptables >/dev/null || exit 0; iptables -w -S | ` + grep + ` | ` +
		`while read -r op rest; do eval "iptables -w -D $rest" || exit 1; done`
}

// grepComment is a grep for the lines of iptables -S whose comment is tag, or begins with it when
// prefix: iptables prints a comment in double quotes when it holds a character such as ":", bare
// otherwise.
func grepComment(tag string, prefix bool) string {
	bare, quoted := "--comment "+tag+" ", `--comment "`+tag+`"`
	if prefix {
		bare, quoted = "--comment "+tag, `--comment "`+tag
	}
	return "grep -F -e " + sshhost.Quote(bare) + " -e " + sshhost.Quote(quoted)
}

// sshNode is one node's server on its host.
type sshNode struct {
	r     *sshRunner
	m     *sshMachine
	sp    nodeSpec
	port  int
	local string
	env   []string
}

// sshProc is a server started on a host: the pid of its process group.
type sshProc struct {
	m   *sshMachine
	num int
}

func (p sshProc) pid() int { return p.num }

// alive is false once the host says the process is gone; a host that does not answer says nothing.
func (p sshProc) alive(ctx context.Context) bool {
	ok, err := p.m.h.Alive(ctx, p.num)
	return err != nil || ok
}

// prepare removes the files of a start without data.
func (h *sshNode) prepare(ctx context.Context, wipe []string) error {
	if len(wipe) == 0 {
		return nil
	}
	rm := "rm -rf"
	for _, f := range wipe {
		rm += " " + sshhost.Quote(f)
	}
	if _, err := h.m.h.Sh(ctx, rm); err != nil {
		return fmt.Errorf("without data: %w", err)
	}
	return nil
}

func (h *sshNode) launch(ctx context.Context, cmd []string) (proc, error) {
	env := append(append([]string(nil), h.sp.env...), h.env...)
	pid, err := h.m.h.Start(ctx, h.sp.dir, path.Join(h.sp.dir, "stdout.log"), env, cmd)
	if err != nil {
		return nil, fmt.Errorf("start node %s on %s: %w", h.sp.name, h.m.name, err)
	}
	return sshProc{m: h.m, num: pid}, nil
}

func (h *sshNode) log(ctx context.Context, file string) ([]byte, error) {
	return h.m.h.Sh(ctx, "cat "+sshhost.Quote(path.Join(h.sp.dir, file)))
}

// output is the last lines of the node's log and output.
func (h *sshNode) output(ctx context.Context) string {
	var parts []string
	for _, f := range []string{"stdout.log", logFileOf(h.sp)} {
		if b, err := h.log(ctx, f); err == nil {
			if t := tail(string(b), 3); t != "" {
				parts = append(parts, t)
			}
		}
	}
	where := fmt.Sprintf(" (on %s, in %s)", h.m.name, h.sp.dir)
	if len(parts) == 0 {
		return "it wrote nothing" + where
	}
	return strings.Join(parts, " | ") + where
}

// kill sends SIGKILL to the server's process group (anything it forked goes with it) and waits
// until the process is gone (a zombie counts as gone), at most 10 s.
func (h *sshNode) kill(ctx context.Context, p proc, _ bool) error {
	pid := p.pid()
	script := fmt.Sprintf(`kill -9 -%d 2>/dev/null; i=0; while st=$(ps -o stat= -p %d) && [ "${st#Z}" = "$st" ]; do i=$((i+1)); [ $i -lt 1000 ] || exit 1; sleep 0.01; done`, pid, pid)
	if _, err := h.m.h.Sh(ctx, script); err != nil {
		return fmt.Errorf("on %s: still runs 10s after SIGKILL: %w", h.m.name, err)
	}
	return nil
}

// signal sends sig to the server's process group.
func (h *sshNode) signal(ctx context.Context, p proc, sig syscall.Signal) error {
	_, err := h.m.h.Sh(ctx, fmt.Sprintf("kill -%d -%d", int(sig), p.pid()))
	return err
}

// setClock writes the offset in place into the file the node's shim maps (1<> opens it without
// truncating: the same file, the same pages), whether the node runs, is paused or is down.
func (h *sshNode) setClock(ctx context.Context, offset time.Duration) error {
	if h.env == nil {
		return fmt.Errorf("node %s runs without the clock shim", h.sp.name)
	}
	_, err := h.m.h.Sh(ctx, `printf '`+octal(offset)+`' 1<>`+sshhost.Quote(ClockFile(h.sp.dir)))
	return err
}

// fetchLogs copies the node's logs (*.log) into its directory in the run's store.
func (h *sshNode) fetchLogs(ctx context.Context) error {
	out, err := h.m.h.Sh(ctx, "cd "+sshhost.Quote(h.sp.dir)+" && ls -1")
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range strings.Fields(string(out)) {
		if !strings.HasSuffix(f, ".log") && !strings.HasSuffix(f, ".conf") {
			continue
		}
		b, err := h.log(ctx, f)
		if err == nil {
			err = os.WriteFile(filepath.Join(h.local, f), b, 0o644)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
