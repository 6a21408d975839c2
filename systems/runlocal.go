package systems

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// localRunner runs nodes as foreground child processes on loopback. Each node lives in its own
// process group with a parent-death signal, so no node outlives the harness however the harness
// ends. Its clock moves as the shim maps a file of one native-endian int64 (nanoseconds) in the
// node's directory and adds it to every wall-clock read.
type localRunner struct{ shim string }

func (r localRunner) newHost(_ context.Context, sp nodeSpec) (host, place, error) {
	if !filepath.IsAbs(sp.dir) {
		return nil, place{}, fmt.Errorf("node %s: directory %q is not absolute", sp.name, sp.dir)
	}
	if err := os.MkdirAll(sp.dir, 0o755); err != nil {
		return nil, place{}, fmt.Errorf("node %s: %w", sp.name, err)
	}
	h := &localHost{sp: sp}
	if r.shim != "" && sp.shim {
		if err := InitClockFile(ClockFile(sp.dir)); err != nil {
			return nil, place{}, fmt.Errorf("node %s: %w", sp.name, err)
		}
		h.env = []string{"LD_PRELOAD=" + r.shim, ClockFileEnv + "=" + ClockFile(sp.dir)}
	}
	return h, place{addr: sp.addr}, nil
}

func (localRunner) timing() (time.Duration, time.Duration) {
	return 10 * time.Second, 2 * time.Millisecond
}

func (localRunner) killFirst() bool { return true }

func (localRunner) close(context.Context) error { return nil }

// localHost is one node's child process.
type localHost struct {
	sp nodeSpec
	// env is the clock shim's environment, when the node runs with it.
	env []string
	// marks are the node's logs and their sizes before its last start: what follows is that
	// start's output.
	marks []logMark
}

// localProc is a running child process; exited closes once it has been waited for.
type localProc struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

func (p *localProc) alive(context.Context) bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *localProc) pid() int { return p.cmd.Process.Pid }

func (h *localHost) prepare(_ context.Context, wipe []string) error {
	for _, f := range wipe {
		os.RemoveAll(f)
	}
	if h.sp.reserved != nil {
		h.sp.reserved.Close()
		h.sp.reserved = nil
	}
	return nil
}

func (h *localHost) launch(_ context.Context, args []string) (proc, error) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = h.sp.dir
	cmd.Env = append(append(os.Environ(), h.sp.env...), h.env...)
	// Own process group: a terminal's Ctrl-C reaches the harness, which heals and stops the nodes
	// itself. Pdeathsig: the kernel kills the node if the harness dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: h.sp.cred}
	out, err := os.OpenFile(filepath.Join(h.sp.dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", h.sp.name, err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	h.marks = logMarks(h.sp.dir, "stdout.log", logFileOf(h.sp))
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("start node %s: %w", h.sp.name, err)
	}
	p := &localProc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		out.Close()
		close(p.exited)
	}()
	return p, nil
}

// logFileOf is the log file a node's server writes.
func logFileOf(sp nodeSpec) string {
	if sp.readyLog.file == "" {
		return "redis.log"
	}
	return sp.readyLog.file
}

func (h *localHost) log(_ context.Context, file string) ([]byte, error) {
	return os.ReadFile(filepath.Join(h.sp.dir, file))
}

func (h *localHost) output(context.Context) string { return startOutput(h.marks) }

func (h *localHost) kill(ctx context.Context, p proc, _ bool) error {
	lp := p.(*localProc)
	var children []procID
	if h.sp.group {
		// Children in sessions of their own (PostgreSQL's backends) hold the server's shared
		// memory: a start after the kill would find it in use. They are listed while their parent
		// is stopped and alive (once it dies they belong to init, and a walk finds none of them).
		syscall.Kill(lp.pid(), syscall.SIGSTOP)
		children = childOrGroupProcs(lp.pid())
		for _, c := range children {
			syscall.Kill(c.pid, syscall.SIGKILL)
		}
	}
	// Kill the whole group: nothing the node forked (a replication child) may survive it.
	if err := syscall.Kill(-lp.pid(), syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	<-lp.exited
	// A killed process holds its memory until it has exited; the next start must not see it.
	return waitGone(ctx, children)
}

func (h *localHost) signal(ctx context.Context, p proc, sig syscall.Signal) error {
	var err error
	if h.sp.group {
		err = signalTree(p.pid(), sig)
	} else {
		err = p.(*localProc).cmd.Process.Signal(sig)
	}
	if err != nil || sig != syscall.SIGSTOP {
		return err
	}
	return waitStopped(ctx, p.pid())
}

// waitStopped waits until every thread of process pid is stopped (or the process is gone): kill
// returns before a stop takes, and a server's threads still running (etcd's, on a loaded machine)
// answer a request after the pause was applied. The bound only ends a hang.
func waitStopped(ctx context.Context, pid int) error {
	task := "/proc/" + strconv.Itoa(pid) + "/task"
	for {
		threads, err := os.ReadDir(task)
		if err != nil {
			return nil // gone
		}
		running := false
		for _, t := range threads {
			f := statFields(task + "/" + t.Name() + "/stat") // none: the thread exited
			if len(f) > 0 && f[0] != "T" && f[0] != "t" && !exited(f) {
				running = true
				break
			}
		}
		if !running {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("process %d not stopped after SIGSTOP: %w", pid, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

func (h *localHost) setClock(_ context.Context, offset time.Duration) error {
	return WriteClockOffset(ClockFile(h.sp.dir), offset)
}

// logMark is a node log and its size before a start: what follows is that start's output.
type logMark struct {
	path string
	size int64
}

// logMarks marks the node's logs: stdout.log takes what a server prints before it opens its log
// file (a bad argument, a directory it cannot enter), its log the rest (a port in use).
func logMarks(dir string, files ...string) []logMark {
	var marks []logMark
	for _, f := range files {
		p := filepath.Join(dir, f)
		var size int64
		if st, err := os.Stat(p); err == nil {
			size = st.Size()
		}
		marks = append(marks, logMark{path: p, size: size})
	}
	return marks
}

// startOutput quotes the last lines a start wrote to the node's logs, and names the files.
func startOutput(marks []logMark) string {
	var parts, files []string
	for _, m := range marks {
		files = append(files, m.path)
		b, err := os.ReadFile(m.path)
		if err != nil || int64(len(b)) <= m.size {
			continue
		}
		if lines := tail(string(b[m.size:]), 3); lines != "" {
			parts = append(parts, lines)
		}
	}
	if len(parts) == 0 {
		return "it wrote nothing (see " + strings.Join(files, ", ") + ")"
	}
	return strings.Join(parts, " | ") + " (see " + strings.Join(files, ", ") + ")"
}

// tail returns the last n non-empty lines of s, joined by " | " so an error stays one line.
func tail(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

// signalTree sends sig to pid and then to its children, which a server (PostgreSQL) may have put in
// sessions of their own: the parent first, so that a stopped one forks no child the walk misses.
func signalTree(pid int, sig syscall.Signal) error {
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	for _, c := range childProcs(pid) {
		syscall.Kill(c.pid, sig)
	}
	return nil
}

// LiveGroupMembers is the pids of process group pgid's members that have not exited: what a
// killed node may not leave behind (a zombie has exited; its reaper is init).
func LiveGroupMembers(pgid int) []int {
	g := strconv.Itoa(pgid)
	var pids []int
	for _, p := range scanProcs(func(f []string) bool { return f[2] == g && !exited(f) }) {
		pids = append(pids, p.pid)
	}
	return pids
}

// childOrGroupProcs lists, in one walk of /proc, the processes whose parent is pid and the living
// members of its process group (a server's child that has not yet left its parent's group is one).
func childOrGroupProcs(pid int) []procID {
	id := strconv.Itoa(pid)
	return scanProcs(func(f []string) bool { return f[1] == id || (f[2] == id && !exited(f)) })
}

// scanProcs lists the processes in /proc whose stat fields (see procStat) match, with their start
// times.
func scanProcs(match func(f []string) bool) []procID {
	entries, _ := os.ReadDir("/proc")
	var out []procID
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := procStat(pid); len(f) > 19 && match(f) {
			out = append(out, procID{pid: pid, start: f[19]})
		}
	}
	return out
}

// exited tells whether a process's stat fields are a zombie's or a dead process's.
func exited(f []string) bool { return f[0] == "Z" || f[0] == "X" }

// procID names a process beyond its pid, which the kernel reuses: by its start time too.
type procID struct {
	pid   int
	start string
}

// childProcs lists the processes whose parent is pid, from /proc, with their start times.
func childProcs(pid int) []procID {
	id := strconv.Itoa(pid)
	return scanProcs(func(f []string) bool { return f[1] == id })
}

// procStat is /proc/PID/stat's fields after the command name (which is in parentheses and may hold
// spaces): state, ppid, ... (f[19] is the start time); nil when the process is gone.
func procStat(pid int) []string { return statFields("/proc/" + strconv.Itoa(pid) + "/stat") }

// statFields is procStat for the stat file at path (a process's, or one of its threads').
func statFields(path string) []string {
	stat, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
}

// waitGone waits until every process in ps has exited (gone, a zombie, or its pid reused): an
// exited process no longer holds memory. The bound only ends a hang.
func waitGone(ctx context.Context, ps []procID) error {
	for _, p := range ps {
		for {
			f := procStat(p.pid)
			if len(f) <= 19 || exited(f) || f[19] != p.start {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("process %d still running after SIGKILL: %w", p.pid, ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return nil
}
