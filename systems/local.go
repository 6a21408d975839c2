package systems

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockpick-dev/lockpick/clusters"
)

// process is how the local backend runs one node: a redis-server (or sentinel) command line with
// every path in it absolute, and the files that hold the node's data.
type process struct {
	name string
	dir  string
	args []string
	// addr is the node's own address, pinged for readiness.
	addr string
	// data are the files removed by a start without data; the configuration file is never among
	// them (Sentinel keeps its state there, and rewrites a replica's there).
	data []string
	// reserved holds the node's port until its first start.
	reserved net.Listener
	// env is added to the node's environment.
	env []string
	// ready answers nil once the node serves; nil means a redis PING on addr.
	ready func(ctx context.Context) error
	// wipedArgs, when set, replace args on a start without data after the first start (an etcd
	// member that lost its data joins its cluster as an existing one).
	wipedArgs []string
	started   bool

	cmd    *exec.Cmd
	exited chan struct{}
}

// local runs nodes as foreground child processes on loopback. Each node lives in its own process
// group with a parent-death signal, so no node outlives the harness however the harness ends.
type local struct {
	binary  string
	shim    string
	persist clusters.Persistence
	log     *slog.Logger

	mu    sync.Mutex
	procs map[string]*process
	order []string
}

func newLocal(binary, shim string, persist clusters.Persistence, log *slog.Logger) *local {
	return &local{binary: binary, shim: shim, persist: persist, log: log, procs: map[string]*process{}}
}

// add declares a node; it does not start it.
func (b *local) add(p *process) error {
	if !filepath.IsAbs(p.dir) {
		return fmt.Errorf("node %s: directory %q is not absolute", p.name, p.dir)
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return fmt.Errorf("node %s: %w", p.name, err)
	}
	if b.shim != "" {
		if err := initClockFile(clockFile(p.dir)); err != nil {
			return fmt.Errorf("node %s: %w", p.name, err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.procs[p.name] = p
	b.order = append(b.order, p.name)
	return nil
}

func (b *local) proc(name string) (*process, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.procs[name]
	if !ok {
		return nil, fmt.Errorf("no node %q", name)
	}
	return p, nil
}

// Start implements Backend.
func (b *local) Start(ctx context.Context, name string) error {
	return b.start(ctx, name, b.persist == clusters.PersistNone)
}

// StartEmpty implements Backend.
func (b *local) StartEmpty(ctx context.Context, name string) error { return b.start(ctx, name, true) }

func (b *local) start(ctx context.Context, name string, wipe bool) error {
	p, err := b.proc(name)
	if err != nil {
		return err
	}
	b.mu.Lock()
	if p.cmd != nil {
		b.mu.Unlock()
		return fmt.Errorf("node %s is already running", name)
	}
	if wipe {
		// Nothing may survive a restart without data: a stale dump would make the restart a lie.
		for _, f := range p.data {
			os.RemoveAll(f)
		}
	}
	if p.reserved != nil {
		p.reserved.Close()
		p.reserved = nil
	}
	args := p.args
	if wipe && p.started && p.wipedArgs != nil {
		args = p.wipedArgs
	}
	p.started = true
	cmd := exec.Command(b.binary, args...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), p.env...)
	if b.shim != "" {
		cmd.Env = append(cmd.Env, "LD_PRELOAD="+b.shim, clusters.ClockFileEnv+"="+clockFile(p.dir))
	}
	// Own process group: a terminal's Ctrl-C reaches the harness, which heals and stops the nodes
	// itself. Pdeathsig: the kernel kills the node if the harness dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := os.OpenFile(filepath.Join(p.dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.mu.Unlock()
		return fmt.Errorf("node %s: %w", name, err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		b.mu.Unlock()
		return fmt.Errorf("start node %s: %w", name, err)
	}
	p.cmd = cmd
	exited := make(chan struct{})
	p.exited = exited
	b.mu.Unlock()
	go func() {
		cmd.Wait()
		out.Close()
		close(exited)
	}()
	b.log.Debug("node started", "node", name, "addr", p.addr, "pid", cmd.Process.Pid)
	if err := b.waitReady(ctx, p, exited); err != nil {
		b.Kill(name)
		return err
	}
	return nil
}

func (b *local) waitReady(ctx context.Context, p *process, exited <-chan struct{}) error {
	deadline := time.Now().Add(10 * time.Second)
	ready := p.ready
	if ready == nil {
		ready = func(ctx context.Context) error { return clusters.PingOnce(ctx, p.addr) }
	}
	for {
		err := ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return clusters.StartFailure(p.name, fmt.Sprintf("%s (see %s)", lastLines(p.dir), filepath.Join(p.dir, "stdout.log")))
		case <-ctx.Done():
			return fmt.Errorf("node %s: %w", p.name, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s did not answer within 10s: %w", p.name, err)
		}
	}
}

// lastLines is the end of what a node wrote before it died, from its log and its output.
func lastLines(dir string) string {
	var parts []string
	for _, f := range []string{"redis.log", "stdout.log", "etcd.log"} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) > 3 {
			lines = lines[len(lines)-3:]
		}
		if s := strings.TrimSpace(strings.Join(lines, " | ")); s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return "no output"
	}
	return strings.Join(parts, " | ")
}

// Kill implements Backend.
func (b *local) Kill(name string) error {
	p, err := b.proc(name)
	if err != nil {
		return err
	}
	b.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.cmd = nil
	b.mu.Unlock()
	if cmd == nil {
		return nil
	}
	// Kill the whole group: nothing the node forked (a replication child) may survive it.
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill node %s: %w", name, err)
	}
	<-exited
	b.log.Debug("node killed", "node", name)
	return nil
}

// Running implements Backend.
func (b *local) Running(name string) bool {
	p, err := b.proc(name)
	if err != nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return p.cmd != nil
}

// Pid returns a running node's process id, or 0.
func (b *local) Pid(name string) int {
	p, err := b.proc(name)
	if err != nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Signal implements Backend.
func (b *local) Signal(name string, sig syscall.Signal) error {
	p, err := b.proc(name)
	if err != nil {
		return err
	}
	b.mu.Lock()
	cmd := p.cmd
	b.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("node %s is not running", name)
	}
	return cmd.Process.Signal(sig)
}

// Close kills every node, the last declared first.
func (b *local) Close() error {
	b.mu.Lock()
	order := append([]string(nil), b.order...)
	for _, p := range b.procs {
		if p.reserved != nil {
			p.reserved.Close()
			p.reserved = nil
		}
	}
	b.mu.Unlock()
	var errs []error
	for i := len(order) - 1; i >= 0; i-- {
		errs = append(errs, b.Kill(order[i]))
	}
	return errors.Join(errs...)
}
