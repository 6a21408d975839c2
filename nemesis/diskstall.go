package nemesis

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/systems"
)

// DiskStall holds a server's fsyncs: every fsync, fdatasync and sync_file_range its process calls
// blocks until the heal, as on a disk that stops acknowledging writes, while the rest of the process
// runs on. A server that makes its state durable before it acts (etcd's raft loop saving its log,
// ZooKeeper's transaction log, Redis with appendfsync always) stops acting, but its other threads
// keep answering: etcd#15247's leader, stuck in its raft loop while its lease loop carries on, is this
// fault. strace holds the calls (its fault injection, delay_enter), attached to the node's process
// for the length of the stall; it is stopped at the heal, and the calls held complete then. strace
// cannot filter the system calls of a process it attaches to (seccomp needs it to start the
// process), so the node's other calls also stop briefly in strace while it is attached: the node
// runs slower besides, as a stalled disk's host under I/O pressure does.
type DiskStall struct {
	Env    Env
	Target string
	// Durations are drawn from for each fault.
	Durations []time.Duration
	Interval  time.Duration
	// Strace is the strace binary.
	Strace string

	resolve leaseResolver
	mu      sync.Mutex
	tracers map[string]*exec.Cmd // node -> the strace holding its fsyncs
}

// The disk stall's operations.
const (
	FStall   = "stall"
	FUnstall = "unstall"
)

// heldSyncCalls are the system calls a stall holds: the ones that wait for the disk.
const heldSyncCalls = "fsync,fdatasync,sync_file_range"

// attachWait bounds the wait for strace to attach to every thread of the node.
const attachWait = 5 * time.Second

func diskStallParams() []Param { return stopParams("how long a node's fsyncs stay held") }

func buildDiskStall(env Env, p *Params) (Nemesis, error) {
	s, err := readStopParams(env, p)
	if err != nil {
		return nil, err
	}
	strace, err := exec.LookPath("strace")
	if err != nil {
		return nil, errors.New("disk-stall holds fsyncs with strace, which is not installed: run scripts/install-deps.sh (or apt-get install strace)")
	}
	n := &DiskStall{Env: env, Target: s.target, Durations: s.durations, Interval: s.interval, Strace: strace, resolve: leaseResolver{env: env, target: s.target}}
	return n, nil
}

// Name implements Nemesis.
func (n *DiskStall) Name() string { return "disk-stall" }

// Plan implements Nemesis: one stall at a time; lock-aware and role targets are chosen by Resolve.
func (n *DiskStall) Plan(rng *rand.Rand, timeLimit time.Duration) []Op {
	return targetPlan(rng, &n.resolve, n.Env.Nodes, n.Interval, timeLimit, FStall, FUnstall, func() time.Duration {
		return n.Durations[rng.IntN(len(n.Durations))]
	})
}

// Resolve implements Resolver: a role target stalls the node that has the role now (the leader),
// a lock-aware one the nodes of a lease; the heal releases whatever is stalled.
func (n *DiskStall) Resolve(ctx context.Context, op Op) (Op, error) {
	return resolveTargets(ctx, op, &n.resolve, n.Env.TTL, FUnstall, n.stalledNodes)
}

func (n *DiskStall) stalledNodes() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Sorted(maps.Keys(n.tracers))
}

// Apply implements Nemesis. A node that is down is not stalled: there is no process to hold, and
// the one that replaces it starts with a working disk.
func (n *DiskStall) Apply(ctx context.Context, op Op) error {
	if n.Env.Cluster == nil {
		return errors.New("no cluster to stall")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.tracers == nil {
		n.tracers = map[string]*exec.Cmd{}
	}
	var errs []error
	for _, node := range op.Nodes {
		switch op.F {
		case FStall:
			pid := n.Env.Cluster.Pid(node)
			if pid == 0 || n.tracers[node] != nil {
				n.Env.Log.Info("disk-stall: node is down or already stalled, not stalled", "node", node)
				continue
			}
			cmd, err := n.stall(ctx, pid)
			if err != nil {
				errs = append(errs, fmt.Errorf("stall %s: %w", node, err))
				continue
			}
			n.tracers[node] = cmd
		case FUnstall:
			if cmd := n.tracers[node]; cmd != nil {
				delete(n.tracers, node)
				if err := unstall(cmd); err != nil {
					errs = append(errs, fmt.Errorf("unstall %s: %w", node, err))
				}
			}
		default:
			return fmt.Errorf("disk-stall nemesis cannot %q", op.F)
		}
	}
	return errors.Join(errs...)
}

// stall attaches strace to every thread of every process in pid's process group (a local node is
// a group of its own: PostgreSQL's backends and WAL writer, Redis's forks), holding their sync
// calls, and returns once strace is the tracer of each (the stall is then surely in effect);
// processes the group forks later are traced too (-f). The delay strace applies is far longer than
// any stall: the heal ends it by stopping strace; strace dies with the harness (Pdeathsig), and
// the calls it held then complete.
func (n *DiskStall) stall(ctx context.Context, pid int) (*exec.Cmd, error) {
	hold := 10 * max(slices.Max(n.Durations), time.Minute)
	pids := systems.LiveGroupMembers(pid)
	if !slices.Contains(pids, pid) {
		pids = append(pids, pid)
	}
	args := []string{"-f", "-qq", "-o", "/dev/null", "-e", "trace=" + heldSyncCalls,
		"-e", fmt.Sprintf("inject=%s:delay_enter=%dus", heldSyncCalls, hold.Microseconds())}
	for _, p := range pids {
		args = append(args, "-p", strconv.Itoa(p))
	}
	cmd := exec.Command(n.Strace, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start strace: %w", err)
	}
	deadline := time.Now().Add(attachWait)
	for {
		traced, err := tracedBy(pid, pids, cmd.Process.Pid)
		if traced {
			return cmd, nil
		}
		if err != nil || time.Now().After(deadline) || ctx.Err() != nil {
			unstall(cmd)
			if err == nil {
				err = fmt.Errorf("strace had not attached to every thread of process %d and its group within %v", pid, attachWait)
			}
			return nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// tracedBy reports whether every thread of the processes pids has tracer as its tracer
// (/proc/PID/task/*/status). A process of the group that ended meanwhile is passed over; main, the
// node's own process, must be there.
func tracedBy(main int, pids []int, tracer int) (bool, error) {
	for _, pid := range pids {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
		if len(tasks) == 0 && pid == main {
			return false, fmt.Errorf("process %d is gone", pid)
		}
		for _, status := range tasks {
			if t, err := tracerOf(status); err == nil && t != tracer {
				return false, nil // a thread strace has not reached yet
			}
		}
	}
	return true, nil
}

// tracerOf reads the TracerPid line of a /proc status file.
func tracerOf(status string) (int, error) {
	f, err := os.Open(status)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "TracerPid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("%s has no TracerPid", status)
}

// unstall stops strace (SIGTERM: it detaches from every thread, and the held calls go on), killing
// it if it has not exited within a few seconds.
func unstall(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop strace: %w", err)
	}
	select {
	case <-done:
		return nil
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-done
		return errors.New("strace did not detach within 5s and was killed")
	}
}

// Healing implements Nemesis: release every node this nemesis stalled.
func (n *DiskStall) Healing() []Op {
	nodes := n.stalledNodes()
	if len(nodes) == 0 {
		return nil
	}
	return []Op{{F: FUnstall, Nodes: nodes, Effect: history.EffectHeal}}
}
