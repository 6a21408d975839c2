package locks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// gozkRoot is the parent of go-zk's lock paths, one per key (the lease probe reads it).
const gozkRoot = "/lockpick-gozk/"

// gozkProbe reads who holds each key of the go-zk lock.
func gozkProbe(nodes []Node) (ProbeCloser, error) { return newZKProbe(nodes, gozkRoot) }

// gozkLock is go-zookeeper/zk's lock recipe as its users take it: one connection (one session, its
// timeout the run's TTL) and a zk.NewLock per acquire on ROOT+KEY. The recipe has no deadline: a
// hold lasts while the session lives, and the holder learns of the session's end only from the
// connection's events (StateExpired, seen after it reconnects), which are reported as losses. The
// fencing token is the holder's lock node's sequence number plus one (rising per key; a token is
// never zero).
type gozkLock struct {
	conn  *zk.Conn
	gate  *connGate
	nodes []string

	mu      sync.Mutex
	held    map[string]*gozkHold
	notify  func(LeaseEvent)
	crashed bool
}

type gozkHold struct {
	lock  *zk.Lock
	value string
}

func newGozk(eps []Endpoint, o Options) (Locker, error) {
	o = o.withDefaults()
	l := &gozkLock{gate: newConnGate(), held: map[string]*gozkHold{}}
	var addrs []string
	for _, e := range eps {
		addrs = append(addrs, e.Addr)
		l.nodes = append(l.nodes, e.Node)
	}
	ttl := max(o.TTL, time.Second)
	conn, _, err := zk.Connect(addrs, ttl, zk.WithLogger(log.New(io.Discard, "", 0)),
		zk.WithDialer(l.gate.dial), zk.WithEventCallback(l.event))
	if err != nil {
		return nil, fmt.Errorf("go-zk client: %w", err)
	}
	l.conn = conn
	return l, nil
}

// event reports the session's expiry as the loss of every hold in it.
func (l *gozkLock) event(e zk.Event) {
	if e.Type != zk.EventSession || e.State != zk.StateExpired {
		return
	}
	l.mu.Lock()
	var lost []LeaseEvent
	for key, h := range l.held {
		lost = append(lost, LeaseEvent{Key: key, Value: h.value, Lost: true})
	}
	clear(l.held)
	f, crashed := l.notify, l.crashed
	l.mu.Unlock()
	if f != nil && !crashed {
		for _, e := range lost {
			f(e)
		}
	}
}

// Acquire implements Locker: Lock waits in line with no bound of its own, so the wait is bounded by
// half the TTL (as an application bounds it) or ctx; then this client's waiting node is deleted and
// the key is refused as held. The abandoned Lock call is released if it ever returns granted.
func (l *gozkLock) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	start := time.Now()
	path := gozkRoot + key
	m := zk.NewLock(l.conn, path, zk.WorldACL(zk.PermAll))
	done := make(chan error, 1)
	go func() { done <- m.Lock() }()
	wait := time.NewTimer(max(ttl/2, 100*time.Millisecond))
	defer wait.Stop()
	select {
	case err := <-done:
		if err != nil {
			return nil, gozkClassify(err)
		}
	case <-ctx.Done():
		return nil, l.giveUp(key, m, done)
	case <-wait.C:
		return nil, l.giveUp(key, m, done)
	}
	// The recipe keeps its node's path to itself; the holder's node is the lowest in line.
	node, seq, err := l.lowest(path)
	if err != nil {
		m.Unlock()
		return nil, indeterminate(fmt.Errorf("go-zk lock %s: read own node: %w", key, err))
	}
	value := path + "/" + node
	l.mu.Lock()
	l.held[key] = &gozkHold{lock: m, value: value}
	l.mu.Unlock()
	return &Lease{Key: key, Value: value, Token: seq + 1, Start: start, Nodes: l.nodes}, nil
}

// giveUp withdraws an acquire that waited too long: it deletes this session's nodes under the key
// that no hold of this client owns (the waiting node, whose name the recipe keeps to itself).
func (l *gozkLock) giveUp(key string, m *zk.Lock, done <-chan error) error {
	go func() {
		if <-done == nil {
			m.Unlock() // granted after all, on a node already deleted: nothing to hold
		}
	}()
	path := gozkRoot + key
	l.mu.Lock()
	var mine string
	if h, ok := l.held[key]; ok {
		mine = h.value
	}
	l.mu.Unlock()
	children, _, err := l.conn.Children(path)
	if err != nil {
		return indeterminate(fmt.Errorf("go-zk lock %s: withdraw: %w", key, err))
	}
	for _, c := range children {
		_, st, err := l.conn.Get(path + "/" + c)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return indeterminate(fmt.Errorf("go-zk lock %s: withdraw: %w", key, err))
		}
		if st.EphemeralOwner != l.conn.SessionID() || path+"/"+c == mine {
			continue
		}
		if err := l.conn.Delete(path+"/"+c, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return indeterminate(fmt.Errorf("go-zk lock %s: withdraw: %w", key, err))
		}
	}
	return ErrHeld
}

// lowest is the child of path with the lowest sequence, and that sequence.
func (l *gozkLock) lowest(path string) (string, int64, error) {
	children, _, err := l.conn.Children(path)
	if err != nil {
		return "", 0, err
	}
	if len(children) == 0 {
		return "", 0, errors.New("no lock node")
	}
	node := slices.MinFunc(children, func(a, b string) int { return strings.Compare(sequence(a), sequence(b)) })
	seq, err := strconv.ParseInt(sequence(node), 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("lock node %s: %w", node, err)
	}
	return node, seq, nil
}

// Release implements Locker: Unlock deletes the holder's node.
func (l *gozkLock) Release(_ context.Context, ls *Lease) error {
	l.mu.Lock()
	h, ok := l.held[ls.Key]
	if ok && h.value == ls.Value {
		delete(l.held, ls.Key)
	}
	l.mu.Unlock()
	if !ok || h.value != ls.Value {
		return ErrLeaseLost
	}
	return gozkClassify(h.lock.Unlock())
}

// Extend implements Locker: the session is kept alive by the library's pings.
func (l *gozkLock) Extend(context.Context, *Lease, time.Duration) (*Lease, error) {
	return nil, ErrNoExtend
}

// Notify implements Notifier.
func (l *gozkLock) Notify(f func(LeaseEvent)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.notify = f
}

// Pause implements Pausable: nothing leaves the client or reaches it until Resume, pings included.
func (l *gozkLock) Pause() error { l.gate.pause(); return nil }

// Resume implements Pausable.
func (l *gozkLock) Resume() error { l.gate.resume(); return nil }

// Crash implements Crashable: the connection dies without closing its session, whose nodes
// ZooKeeper deletes when it expires.
func (l *gozkLock) Crash() error {
	l.mu.Lock()
	l.crashed = true
	l.mu.Unlock()
	l.gate.kill()
	l.conn.Close()
	return nil
}

// Close implements Locker: closing the session deletes its nodes. A crashed client sends nothing.
func (l *gozkLock) Close() error {
	l.mu.Lock()
	l.crashed = true
	l.mu.Unlock()
	l.gate.resume()
	l.conn.Close()
	return nil
}

// gozkClassify sorts a failed request: refusals are definite; a lost connection or session leaves
// the outcome unknown.
func gozkClassify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zk.ErrNoServer), errors.Is(err, zk.ErrClosing), errors.Is(err, zk.ErrDeadlock):
		return fmt.Errorf("%w: %v", ErrNotAcquired, err)
	case errors.Is(err, zk.ErrNotLocked), errors.Is(err, zk.ErrNoNode):
		return fmt.Errorf("%w: %v", ErrLeaseLost, err)
	}
	return indeterminate(err)
}

// connGate holds a client's connections: paused, nothing is read or written; killed, every read,
// write and dial fails.
type connGate struct {
	mu     sync.Mutex
	cond   *sync.Cond
	paused bool
	dead   bool
}

func newConnGate() *connGate {
	g := &connGate{}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *connGate) pause()  { g.set(func() { g.paused = true }) }
func (g *connGate) resume() { g.set(func() { g.paused = false }) }
func (g *connGate) kill()   { g.set(func() { g.dead, g.paused = true, false }) }

func (g *connGate) set(f func()) {
	g.mu.Lock()
	f()
	g.mu.Unlock()
	g.cond.Broadcast()
}

// wait blocks while paused; it fails once killed.
func (g *connGate) wait() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.paused {
		g.cond.Wait()
	}
	if g.dead {
		return errors.New("client crashed")
	}
	return nil
}

func (g *connGate) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	if err := g.wait(); err != nil {
		return nil, err
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	return &gatedConn{Conn: c, gate: g}, nil
}

// gatedConn is a connection whose reads and writes pass the gate (a read already blocked in the
// kernel completes, but its bytes are held until the gate opens).
type gatedConn struct {
	net.Conn
	gate *connGate
}

func (c *gatedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if werr := c.gate.wait(); werr != nil {
		return 0, werr
	}
	return n, err
}

func (c *gatedConn) Write(b []byte) (int, error) {
	if err := c.gate.wait(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}
