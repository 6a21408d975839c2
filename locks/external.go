package locks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockpick-dev/lockpick/clientproto"
	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/systems"
)

// external is the Locker of one process id whose lock lives in a client program speaking the client
// protocol (docs/protocol.md) on its stdin and stdout. The driver believes only what the program
// says in well-formed replies to requests it sent: anything else (garbage, a reply to an unknown
// id, a second reply, an exit before its init_ok) marks the program broken, and a broken program
// makes the run fail rather than put a guess into the history. An exit nobody asked for after its
// init_ok is a death (Mortal): a finding about the lock's client, after which the workload goes on
// with a fresh process.
type external struct {
	name      string // "client p3 (python3 redis_lock.py)", for errors
	process   int
	cmd       *exec.Cmd
	stdin     *os.File
	logPath   string
	clockFile string
	shim      bool
	caps      clientproto.Capabilities
	ttl       time.Duration
	exited    chan struct{}

	mu      sync.Mutex
	nextID  int64
	pending map[int64]waiting
	late    map[int64]bool     // ids the driver stopped waiting for: a reply to them is dropped
	granted map[[2]string]bool // leases (key, value) the program was granted
	broken  error
	killed  bool
	notify  func(LeaseEvent)
	// ready: the program answered init; an exit after it is a death, before it a broken client.
	ready   bool
	died    *Death
	onDeath func(Death)
	library history.Library
}

// waiting is a request sent and not yet answered.
type waiting struct {
	ch  chan clientproto.Reply
	req clientproto.Request
}

// ClientInitTimeout is how long a client program may take to answer init, by default: generous,
// because a run starts every process's program at once and an interpreter loading its library
// takes a second of CPU (tooz) on a busy machine.
const ClientInitTimeout = time.Minute

// BrokenClientError is a client program that broke the protocol or died unasked: the run cannot
// go on with it. It is indeterminate for the operation it ended (the program's effect is unknown).
type BrokenClientError struct{ Err error }

func (e *BrokenClientError) Error() string { return e.Err.Error() }
func (e *BrokenClientError) Unwrap() error { return &IndeterminateError{Err: e.Err} }

// IsBrokenClient reports whether err is a client program that broke the protocol.
func IsBrokenClient(err error) bool {
	var b *BrokenClientError
	return errors.As(err, &b)
}

// newProgram is the Locker of a client program: startExternal as a Locker (never a typed nil).
func newProgram(command []string, nodes []Endpoint, o Options) (Locker, error) {
	e, err := startExternal(command, nodes, o)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// startExternal starts the client program for process o.Process and runs init over nodes.
func startExternal(command []string, nodes []Endpoint, o Options) (*external, error) {
	if len(command) == 0 {
		return nil, errors.New("the client lock needs a command (--client-cmd)")
	}
	if o.ClientDir == "" {
		return nil, errors.New("the client lock needs a directory for its programs' logs")
	}
	if err := os.MkdirAll(o.ClientDir, 0o755); err != nil {
		return nil, fmt.Errorf("client log directory: %w", err)
	}
	p := "p" + strconv.Itoa(o.Process)
	e := &external{
		name:      fmt.Sprintf("client %s (%s)", p, shortCommand(command)),
		process:   o.Process,
		logPath:   filepath.Join(o.ClientDir, p+".log"),
		clockFile: filepath.Join(o.ClientDir, p+".clock"),
		shim:      o.ClockShim != "",
		ttl:       o.TTL,
		exited:    make(chan struct{}),
		pending:   map[int64]waiting{},
		late:      map[int64]bool{},
		granted:   map[[2]string]bool{},
	}
	if err := e.start(command, o.ClockShim); err != nil {
		return nil, err
	}
	timeout := o.ClientInitTimeout
	if timeout <= 0 {
		timeout = ClientInitTimeout
	}
	if err := e.init(nodes, o, timeout); err != nil {
		e.Close()
		return nil, err
	}
	e.mu.Lock()
	e.ready = true
	e.mu.Unlock()
	return e, nil
}

// shortCommand names a command by its program's base name and its arguments' base names.
func shortCommand(command []string) string {
	parts := make([]string, len(command))
	for i, c := range command {
		parts[i] = filepath.Base(c)
	}
	return strings.Join(parts, " ")
}

// start runs the program (startProgram) with its stdin and stdout on pipes and its stderr in its
// log, and the clock shim when one is given.
func (e *external) start(command []string, shim string) error {
	if err := systems.InitClockFile(e.clockFile); err != nil {
		return err
	}
	logf, err := os.OpenFile(e.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s: log: %w", e.name, err)
	}
	defer logf.Close()
	inR, inW, err := os.Pipe()
	if err != nil {
		return err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return err
	}
	env := append(os.Environ(), systems.ClockFileEnv+"="+e.clockFile)
	if shim != "" {
		env = append(env, "LD_PRELOAD="+shim)
	}
	cmd, err := startProgram(command, env, inR, outW, logf)
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return fmt.Errorf("%s: start: %w", e.name, err)
	}
	e.cmd, e.stdin = cmd, inW
	go e.wait()
	go e.read(outR)
	return nil
}

// startProgram starts command in its own process group, killed by the kernel if the harness dies
// without cleaning up (Pdeathsig), and in its own PID namespace where the system allows one: when
// the program dies, the kernel kills every process it left, even one that made itself a session of
// its own. Without namespaces (EPERM, user namespaces off), the group and Pdeathsig still hold.
func startProgram(command, env []string, stdin, stdout, stderr *os.File) (*exec.Cmd, error) {
	attrs := []*syscall.SysProcAttr{{Setpgid: true, Pdeathsig: syscall.SIGKILL, Cloneflags: syscall.CLONE_NEWPID}}
	if os.Geteuid() != 0 {
		uid, gid := os.Getuid(), os.Getgid()
		attrs[0].Cloneflags |= syscall.CLONE_NEWUSER
		attrs[0].UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		attrs[0].GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	}
	attrs = append(attrs, &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL})
	var err error
	for _, a := range attrs {
		cmd := exec.Command(command[0], command[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr, cmd.Env, cmd.SysProcAttr = stdin, stdout, stderr, env, a
		if err = cmd.Start(); err == nil {
			return cmd, nil
		}
	}
	return nil, err
}

// wait reaps the program. An exit nobody asked for before its init_ok breaks it (it never
// started); after it, the program died: the death is told (OnDeath) before any request in flight
// returns, so the history has it before the request's unknown outcome.
func (e *external) wait() {
	e.cmd.Wait()
	e.mu.Lock()
	switch {
	case e.killed:
	case !e.ready:
		e.breakLocked(fmt.Errorf("exited (%v)", e.cmd.ProcessState))
	default:
		e.died = &Death{Process: e.process, Exit: e.cmd.ProcessState.String(), Stderr: lastLogLines(e.logPath)}
		if e.onDeath != nil {
			e.onDeath(*e.died)
		}
	}
	for id, w := range e.pending { // killed by the harness: what it was doing is unknown
		close(w.ch)
		delete(e.pending, id)
	}
	e.mu.Unlock()
	close(e.exited)
}

// read takes the program's stdout line by line until it ends.
func (e *external) read(out *os.File) {
	defer out.Close()
	r := clientproto.NewReader(out)
	for {
		line, err := r.Line()
		if err != nil {
			if errors.Is(err, io.EOF) {
				// An exit closes stdout too: give wait the chance to say why.
				select {
				case <-e.exited:
					return
				case <-time.After(time.Second):
				}
				err = errors.New("closed its stdout while running")
			}
			e.mu.Lock()
			if !e.killed {
				e.breakLocked(err)
			}
			e.mu.Unlock()
			e.kill()
			return
		}
		m, err := clientproto.Decode(line)
		if err == nil {
			err = e.deliver(m)
		}
		if err != nil {
			e.breakWith(err)
			return
		}
	}
}

// deliver hands a reply to the request waiting for it, or applies an event.
func (e *external) deliver(m clientproto.Reply) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.died != nil || e.killed {
		return nil // the last words of a program that is gone: its requests were recorded unknown
	}
	if m.InReplyTo == nil {
		if !e.granted[[2]string{m.Key, m.Value}] {
			return fmt.Errorf("%s event for lease %s=%s that it was never granted", m.Type, m.Key, m.Value)
		}
		if e.notify != nil && !e.killed {
			ev := LeaseEvent{Key: m.Key, Value: m.Value, Lost: m.Type == clientproto.TypeLost}
			if m.ValidityMS != nil && !ev.Lost {
				ev.Deadline = time.Now().Add(ms(*m.ValidityMS))
			}
			e.notify(ev)
		}
		return nil
	}
	id := *m.InReplyTo
	if w, ok := e.pending[id]; ok {
		delete(e.pending, id)
		if w.req.Type == clientproto.TypeAcquire && m.Type == clientproto.TypeAcquireOK && m.Value != "" {
			// Known before the next line is read: an event may follow the grant at once.
			e.granted[[2]string{w.req.Key, m.Value}] = true
		}
		w.ch <- m
		return nil
	}
	if e.late[id] {
		delete(e.late, id) // the request timed out and was recorded unknown: its answer changes nothing
		return nil
	}
	if id >= 0 && id < e.nextID {
		return fmt.Errorf("answered request %d twice", id)
	}
	return fmt.Errorf("answered request %d, which was never sent", id)
}

// breakLocked marks the program broken with err (the first reason wins) and fails every waiting
// request. e.mu is held.
func (e *external) breakLocked(err error) {
	if e.broken == nil {
		e.broken = &BrokenClientError{Err: fmt.Errorf("%s: %w; its stderr ends: %s", e.name, err, lastLogLines(e.logPath))}
	}
	for id, w := range e.pending {
		close(w.ch)
		delete(e.pending, id)
	}
}

// lastLogLines is the end of a client's log, on one line.
func lastLogLines(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	s := strings.Join(lines, " | ")
	if len(s) > 400 {
		s = "..." + s[len(s)-400:]
	}
	if s == "" {
		return "(nothing) (" + path + ")"
	}
	return s + " (" + path + ")"
}

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// init sends init and waits for init_ok.
func (e *external) init(nodes []Endpoint, o Options, timeout time.Duration) error {
	msg := clientproto.Init{Type: clientproto.TypeInit, Process: o.Process, KeyPrefix: o.KeyPrefix, TTLMS: o.TTL.Milliseconds(), Options: o.ClientOptions}
	for _, n := range nodes {
		msg.Nodes = append(msg.Nodes, clientproto.Node{Name: n.Node, Addr: n.Addr, Role: string(n.Role)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req := clientproto.Request{Type: clientproto.TypeInit}
	r, _, err := e.call(ctx, &req, msg)
	if errors.Is(err, context.DeadlineExceeded) {
		e.kill()
		return fmt.Errorf("%s did not answer init within %v; its stderr ends: %s", e.name, timeout, lastLogLines(e.logPath))
	}
	if err != nil {
		return err
	}
	if r.Type == clientproto.TypeError {
		return fmt.Errorf("%s refused init: %s %s; its stderr ends: %s", e.name, r.Code, r.Text, lastLogLines(e.logPath))
	}
	if r.Type != clientproto.TypeInitOK {
		return fmt.Errorf("%s answered init with %s; its stderr ends: %s", e.name, r.Type, lastLogLines(e.logPath))
	}
	e.caps = *r.Capabilities
	e.library = history.Library{Name: r.Library, Version: r.Version, Kind: history.LibraryProgram}
	offered := map[string]bool{"validity": e.caps.Validity, "token": e.caps.Token, "extend": e.caps.Extend, "watchdog": e.caps.Watchdog, "reentrant": e.caps.Reentrant}
	for _, c := range o.ClientCaps {
		if !offered[c] {
			return fmt.Errorf("%s: the configuration declares capability %s and its init_ok does not offer it: drop it from the declared capabilities or fix the client", e.name, c)
		}
	}
	return nil
}

// call sends req (or body, when given, with req's id) and waits for its reply. It returns the
// reply, the time the request was sent, and an error: ctx's when no reply came in time (the id is
// then dropped), a BrokenClientError when the program broke.
func (e *external) call(ctx context.Context, req *clientproto.Request, body any) (clientproto.Reply, time.Time, error) {
	ch := make(chan clientproto.Reply, 1)
	e.mu.Lock()
	if e.broken != nil || e.died != nil {
		err := e.brokenOr(nil)
		e.mu.Unlock()
		return clientproto.Reply{}, time.Time{}, err
	}
	req.ID = e.nextID
	e.nextID++
	e.pending[req.ID] = waiting{ch: ch, req: *req}
	e.mu.Unlock()
	if body == nil {
		body = req
	} else if in, ok := body.(clientproto.Init); ok {
		in.ID = req.ID
		body = in
	}
	sent := time.Now()
	if err := clientproto.Encode(e.stdin, body); err != nil {
		// A program that just died closed its stdin before it was reaped: let wait say so.
		select {
		case <-e.exited:
		case <-time.After(time.Second):
		}
		e.mu.Lock()
		if !e.killed && e.died == nil {
			e.breakLocked(fmt.Errorf("stopped reading its stdin (%v)", err))
		}
		delete(e.pending, req.ID)
		err = e.brokenOr(err)
		e.mu.Unlock()
		return clientproto.Reply{}, sent, err
	}
	r, err := e.await(ctx, *req, ch)
	return r, sent, err
}

// await waits for the reply to req on ch, and checks it against req and the capabilities.
func (e *external) await(ctx context.Context, req clientproto.Request, ch chan clientproto.Reply) (clientproto.Reply, error) {
	select {
	case r, ok := <-ch:
		if !ok {
			e.mu.Lock()
			defer e.mu.Unlock()
			return clientproto.Reply{}, e.brokenOr(ErrCrashed)
		}
		if req.Type == clientproto.TypeInit {
			return r, nil // init checks its answer itself
		}
		if err := clientproto.Check(req, r, e.caps); err != nil {
			return clientproto.Reply{}, e.breakWith(err)
		}
		return r, nil
	case <-ctx.Done():
		e.mu.Lock()
		if _, ok := e.pending[req.ID]; ok {
			delete(e.pending, req.ID)
			e.late[req.ID] = true
		}
		e.mu.Unlock()
		return clientproto.Reply{}, ctx.Err()
	}
}

// breakWith marks the program broken with err, kills it, and returns the broken error.
func (e *external) breakWith(err error) error {
	e.mu.Lock()
	e.breakLocked(err)
	err = e.broken
	e.mu.Unlock()
	e.kill()
	return err
}

// brokenOr is the program's broken error; when it died, an unknown outcome saying so; else err,
// unknown (it was killed). e.mu is held.
func (e *external) brokenOr(err error) error {
	switch {
	case e.broken != nil:
		return e.broken
	case e.died != nil:
		return indeterminate(fmt.Errorf("%s: %w: the program died (%s)", e.name, ErrCrashed, e.died.Exit))
	}
	return indeterminate(fmt.Errorf("%s: %w", e.name, err))
}

// outcome turns a failed call into the Locker's error: a timeout is an unknown outcome, a broken
// program ends the run.
func (e *external) outcome(op string, err error) error {
	if IsBrokenClient(err) || IsIndeterminate(err) {
		return err
	}
	return indeterminate(fmt.Errorf("%s: no answer to %s: %w", e.name, op, err))
}

// replyError is the Locker's error for an error reply: definite codes as definite failures, any
// other code unknown.
func replyError(op string, r clientproto.Reply) error {
	err := fmt.Errorf("%s: %s %s", op, r.Code, r.Text)
	switch {
	case !clientproto.Definite(r.Code):
		return indeterminate(err)
	case r.Code == clientproto.CodeHeld && op == clientproto.TypeAcquire:
		return fmt.Errorf("%w: %v", ErrHeld, err)
	case r.Code == clientproto.CodeLost && op != clientproto.TypeAcquire:
		return fmt.Errorf("%w: %v", ErrLeaseLost, err)
	case op == clientproto.TypeAcquire:
		return fmt.Errorf("%w: %v", ErrNotAcquired, err)
	}
	return err
}

// Acquire implements Locker. The lease's deadline is the validity the program promised counted
// from the request's send; without one, a watchdog library's lease lasts until its release, and
// any other's until the send plus the TTL.
func (e *external) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	req := clientproto.Request{Type: clientproto.TypeAcquire, Key: key, TTLMS: ttl.Milliseconds()}
	r, sent, err := e.call(ctx, &req, nil)
	if err != nil {
		return nil, e.outcome("acquire", err)
	}
	if r.Type == clientproto.TypeError {
		return nil, replyError(req.Type, r)
	}
	l := &Lease{Key: key, Value: r.Value, Start: sent, Depth: r.Depth}
	if r.Token != nil {
		l.Token = *r.Token
	}
	if err := e.plausible(r, ttl); err != nil {
		return nil, err
	}
	switch {
	case r.ValidityMS != nil:
		l.Deadline = sent.Add(ms(*r.ValidityMS))
	case !e.caps.Watchdog:
		l.Deadline = sent.Add(ttl)
	}
	if !l.Deadline.IsZero() {
		l.Validity = max(time.Until(l.Deadline), 0)
	}
	return l, nil
}

// plausible refuses a validity far beyond the TTL asked for: a library may round a TTL up (to whole
// seconds, say), but a promise of more than twice the TTL (at least the TTL plus a second) is a
// broken client, and the workload, which holds leases across their validity, would hang on it.
func (e *external) plausible(r clientproto.Reply, ttl time.Duration) error {
	if r.ValidityMS == nil {
		return nil
	}
	if v, most := ms(*r.ValidityMS), ttl+max(ttl, time.Second); v > most {
		return e.breakWith(fmt.Errorf("promised a validity of %v for a TTL of %v (more than %v)", v, ttl, most))
	}
	return nil
}

// Release implements Locker.
func (e *external) Release(ctx context.Context, l *Lease) error {
	req := clientproto.Request{Type: clientproto.TypeRelease, Key: l.Key, Value: l.Value}
	r, _, err := e.call(ctx, &req, nil)
	if err != nil {
		return e.outcome("release", err)
	}
	if r.Type == clientproto.TypeError {
		return replyError(req.Type, r)
	}
	return nil
}

// Extend implements Locker: the renewed deadline counts from the request's send.
func (e *external) Extend(ctx context.Context, l *Lease, ttl time.Duration) (*Lease, error) {
	if !e.caps.Extend {
		return nil, fmt.Errorf("%s does not offer extend (its capabilities)", e.name)
	}
	req := clientproto.Request{Type: clientproto.TypeExtend, Key: l.Key, Value: l.Value, TTLMS: ttl.Milliseconds()}
	r, sent, err := e.call(ctx, &req, nil)
	if err != nil {
		return nil, e.outcome("extend", err)
	}
	if r.Type == clientproto.TypeError {
		return nil, replyError(req.Type, r)
	}
	if err := e.plausible(r, ttl); err != nil {
		return nil, err
	}
	nl := *l
	nl.Start, nl.Deadline = sent, sent.Add(ttl)
	if r.ValidityMS != nil {
		nl.Deadline = sent.Add(ms(*r.ValidityMS))
	}
	nl.Validity = max(time.Until(nl.Deadline), 0)
	return &nl, nil
}

// Broken implements Breakable.
func (e *external) Broken() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.broken
}

// OnDeath implements Mortal.
func (e *external) OnDeath(f func(Death)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.onDeath = f
	if e.died != nil {
		f(*e.died)
	}
}

// Died implements Mortal.
func (e *external) Died() *Death {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.died == nil {
		return nil
	}
	d := *e.died
	return &d
}

// Library implements Identified: what the program's init_ok said.
func (e *external) Library() history.Library { return e.library }

// Notify implements Notifier: the program's renewed and lost events.
func (e *external) Notify(f func(LeaseEvent)) {
	e.mu.Lock()
	e.notify = f
	e.mu.Unlock()
}

// signal sends sig to the program's process group. The program leads its group (its pgid is its
// pid), so it cannot leave it; what it starts may, and dies with it through the PID namespace.
func (e *external) signal(sig syscall.Signal) error {
	if err := syscall.Kill(-e.cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("%s: %v: %w", e.name, sig, err)
	}
	return nil
}

// Pause implements Pausable: SIGSTOP of the program's process group.
func (e *external) Pause() error { return e.signal(syscall.SIGSTOP) }

// Resume implements Pausable: SIGCONT.
func (e *external) Resume() error { return e.signal(syscall.SIGCONT) }

// Crash implements Crashable: SIGKILL, nothing released; requests in flight end unknown.
func (e *external) Crash() error {
	e.kill()
	return nil
}

// ShiftClock implements ClockShifter through the clock shim loaded into the program.
func (e *external) ShiftClock(offset time.Duration) error {
	if !e.shim {
		return fmt.Errorf("%s runs without the clock shim: its clock cannot be moved", e.name)
	}
	return systems.WriteClockOffset(e.clockFile, offset)
}

// kill ends the program (and anything it started in its group) for good.
func (e *external) kill() {
	e.mu.Lock()
	e.killed = true
	e.mu.Unlock()
	e.signal(syscall.SIGKILL) // in its own PID namespace, the kernel then kills all it started
}

// Close implements Locker: the program is killed (a retired process id never comes back) and
// reaped before Close returns.
func (e *external) Close() error {
	e.kill()
	<-e.exited
	e.stdin.Close()
	return nil
}
