package locks

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/lockpick-dev/lockpick/systems"
)

// etcdLock is etcd's own lock, as its users take it: a concurrency.Session (a lease kept alive by the
// client library in the background) and a concurrency.Mutex on a prefix per key. The fencing token is
// the revision that created the holder's key.
//
// The deadline of a hold is the lease's end as the client can know it: the time the last answered
// keepalive (or the grant) was sent, plus the TTL the answer gave; every keepalive answer moves it
// and is reported as a renewal, and the session's end as a loss. The client learns of a lease's loss
// up to a keepalive period late, so judging it from the answers' arrival would credit it with time
// the lease never had. The sends and answers are seen by a gRPC interceptor on the library's own
// keepalive stream; nothing of the library is replaced.
type etcdLock struct {
	cli   *clientv3.Client
	opts  Options
	nodes []string
	gate  *grpcGate
	track *keepaliveTrack
	// retryUnlock is an application's pattern, not etcd's: an Unlock that failed with an unknown
	// outcome is retried in the background (after half a TTL, up to three times) on the same Mutex,
	// and the release counts as done. etcd#22082: Mutex.Unlock deletes by key name, which the
	// session's next lock of the same key reuses, so a retry that comes after it deletes the newer
	// lock.
	retryUnlock bool

	mu      sync.Mutex
	session *concurrency.Session
	ttl     int // the session's TTL in seconds
	held    map[string]*etcdHold
	notify  func(LeaseEvent)
	crashed bool
}

type etcdHold struct {
	mutex *concurrency.Mutex
	value string
	lease clientv3.LeaseID
}

func newEtcd(eps []Endpoint, o Options) (Locker, error) { return openEtcd(eps, o, false) }

func newEtcdUnlockRetry(eps []Endpoint, o Options) (Locker, error) { return openEtcd(eps, o, true) }

func openEtcd(eps []Endpoint, o Options, retryUnlock bool) (Locker, error) {
	o = o.withDefaults()
	l := &etcdLock{opts: o, gate: newGRPCGate(), held: map[string]*etcdHold{}, retryUnlock: retryUnlock}
	l.track = newKeepaliveTrack(l.gate, l.renewed)
	var addrs []string
	for _, e := range eps {
		addrs = append(addrs, e.Addr)
		l.nodes = append(l.nodes, e.Node)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   addrs,
		DialTimeout: max(o.NodeTimeout, time.Second),
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{
			grpc.WithUnaryInterceptor(l.track.unary),
			grpc.WithStreamInterceptor(l.track.stream),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	l.cli = cli
	return l, nil
}

// requestTimeout bounds one lock operation, a few requests through raft: at least a lease's time,
// which an election fits in. Requests also ask for a leader (WithRequireLeader), so a member that
// has lost its leader refuses at once, definitely, instead of holding them until the timeout.
func (l *etcdLock) requestTimeout() time.Duration {
	l.mu.Lock()
	ttl := time.Duration(l.ttl) * time.Second
	l.mu.Unlock()
	return max(2*l.opts.NodeTimeout, ttl)
}

// opContext is the context of one lock operation.
func (l *etcdLock) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, l.requestTimeout())
	return clientv3.WithRequireLeader(ctx), cancel
}

// sessionFor returns the live session, or starts one with the TTL of ttl (whole seconds, as etcd
// leases go, rounded up).
func (l *etcdLock) sessionFor(ctx context.Context, ttl time.Duration) (*concurrency.Session, error) {
	l.mu.Lock()
	s := l.session
	l.mu.Unlock()
	if s != nil {
		select {
		case <-s.Done():
		default:
			return s, nil
		}
	}
	secs := max(1, int(math.Ceil(ttl.Seconds())))
	// The lease is granted here, within the acquire's time: NewSession would grant it on the
	// session's own context, which must outlive the acquire and so has no deadline.
	g, err := l.cli.Grant(ctx, int64(secs))
	if err != nil {
		return nil, err
	}
	// The session's keepalives run on a context of their own, as NewSession's default does: the
	// acquire's context asks for a leader, and a keepalive stream that does ends the session as soon
	// as its member loses the leader (clientv3 closes require-leader keepalives), seconds before
	// the lease the keepalives were answered for ends: a loss reported for a lease still alive.
	s, err = concurrency.NewSession(l.cli, concurrency.WithTTL(secs), concurrency.WithLease(g.ID),
		concurrency.WithContext(context.Background()))
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.session, l.ttl = s, secs
	l.mu.Unlock()
	go l.watchSession(s)
	return s, nil
}

// watchSession reports the end of a session as the loss of every lease held in it.
func (l *etcdLock) watchSession(s *concurrency.Session) {
	<-s.Done()
	l.mu.Lock()
	var lost []LeaseEvent
	for key, h := range l.held {
		if h.lease == s.Lease() {
			lost = append(lost, LeaseEvent{Key: key, Value: h.value, Lost: true})
		}
	}
	f, crashed := l.notify, l.crashed
	l.mu.Unlock()
	if f != nil && !crashed {
		for _, e := range lost {
			f(e)
		}
	}
}

// Acquire implements Locker: TryLock on the key's prefix, so a held key is refused at once.
func (l *etcdLock) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	start := time.Now()
	l.mu.Lock()
	if l.ttl == 0 {
		l.ttl = max(1, int(math.Ceil(ttl.Seconds())))
	}
	l.mu.Unlock()
	ctx, cancel := l.opContext(ctx)
	defer cancel()
	s, err := l.sessionFor(ctx, ttl)
	if err != nil {
		return nil, etcdClassify(fmt.Errorf("start session: %w", err))
	}
	m := concurrency.NewMutex(s, key+"/")
	if err := m.TryLock(ctx); err != nil {
		if errors.Is(err, concurrency.ErrLocked) {
			return nil, ErrHeld
		}
		return nil, etcdClassify(err)
	}
	// The key was created by this acquire (the previous hold's release deleted it), so the header's
	// revision is the key's create revision: the fencing token.
	rev := m.Header().Revision
	// The lease was alive when the lock's put under it applied, after start; beyond that the client
	// knows only what its keepalives were answered. A lease whose known end passed before the acquire
	// completed promises nothing (validity zero: no hold).
	deadline, _ := l.track.deadline(int64(s.Lease()))
	deadline = later(deadline, start)
	value := fmt.Sprintf("%s@%d", m.Key(), rev)
	l.mu.Lock()
	l.held[key] = &etcdHold{mutex: m, value: value, lease: s.Lease()}
	l.mu.Unlock()
	return &Lease{Key: key, Value: value, Token: rev, Start: start, Deadline: deadline, Validity: max(0, time.Until(deadline)), Nodes: l.nodes}, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Release implements Locker: Mutex.Unlock deletes the holder's key.
func (l *etcdLock) Release(ctx context.Context, ls *Lease) error {
	l.mu.Lock()
	h, ok := l.held[ls.Key]
	if ok && h.value == ls.Value {
		delete(l.held, ls.Key)
	}
	l.mu.Unlock()
	if !ok || h.value != ls.Value {
		return ErrLeaseLost
	}
	uctx, cancel := l.opContext(ctx)
	defer cancel()
	err := etcdClassify(h.mutex.Unlock(uctx))
	if err != nil && IsIndeterminate(err) && l.retryUnlock {
		go l.retry(h.mutex)
		return nil
	}
	return err
}

// retry is retryUnlock's background retry of a failed Unlock.
func (l *etcdLock) retry(m *concurrency.Mutex) {
	for range 3 {
		time.Sleep(l.requestTimeout() / 2)
		l.mu.Lock()
		crashed := l.crashed
		l.mu.Unlock()
		if crashed {
			return
		}
		ctx, cancel := l.opContext(context.Background())
		err := m.Unlock(ctx)
		cancel()
		if err == nil || errors.Is(err, concurrency.ErrLockReleased) {
			return
		}
	}
}

// Extend implements Locker: the session renews the lease by itself; there is nothing to ask for.
func (l *etcdLock) Extend(context.Context, *Lease, time.Duration) (*Lease, error) {
	return nil, ErrNoExtend
}

// renewed reports a keepalive answer for lease as a renewal of every hold in it.
func (l *etcdLock) renewed(lease int64, deadline time.Time, lost bool) {
	l.mu.Lock()
	var evs []LeaseEvent
	for key, h := range l.held {
		if int64(h.lease) == lease {
			e := LeaseEvent{Key: key, Value: h.value, Lost: lost}
			if !lost {
				e.Deadline = deadline
			}
			evs = append(evs, e)
		}
	}
	f, crashed := l.notify, l.crashed
	l.mu.Unlock()
	if f == nil || crashed {
		return
	}
	for _, e := range evs {
		f(e)
	}
}

// Notify implements Notifier.
func (l *etcdLock) Notify(f func(LeaseEvent)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.notify = f
}

// Pause implements Pausable: nothing the client would send leaves it, keepalives included, and no
// answer reaches it, until Resume.
func (l *etcdLock) Pause() error { l.gate.pause(); return nil }

// Resume implements Pausable.
func (l *etcdLock) Resume() error { l.gate.resume(); return nil }

// Crash implements Crashable: the client stops as a killed process does, its lease left to expire.
func (l *etcdLock) Crash() error {
	l.mu.Lock()
	l.crashed = true
	l.mu.Unlock()
	l.gate.resume()
	return l.cli.Close()
}

// Warm implements Warmer: the client connects and reads the cluster's state.
func (l *etcdLock) Warm(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.requestTimeout())
	defer cancel()
	_, err := l.cli.Get(ctx, "lockpick-warm", clientv3.WithSerializable())
	return err
}

// Close implements Locker: the session's lease is revoked (releasing anything still held), then the
// client closes. A crashed client revokes nothing.
func (l *etcdLock) Close() error {
	l.mu.Lock()
	s, crashed := l.session, l.crashed
	l.crashed = true // no more events
	l.mu.Unlock()
	l.gate.resume()
	if s != nil && !crashed {
		ctx, cancel := context.WithTimeout(context.Background(), l.requestTimeout())
		s.Client().Revoke(ctx, s.Lease())
		cancel()
	}
	return l.cli.Close()
}

// etcdClassify sorts a failed etcd request: refusals that certainly changed nothing (no leader, the
// session's lease gone, a request that never left) are definite; a timeout or a broken connection
// after the request may have been applied is indeterminate.
func etcdClassify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, rpctypes.ErrNoLeader), errors.Is(err, rpctypes.ErrGRPCNoLeader),
		errors.Is(err, rpctypes.ErrLeaseNotFound), errors.Is(err, rpctypes.ErrGRPCLeaseNotFound),
		errors.Is(err, concurrency.ErrSessionExpired), errors.Is(err, errGRPCPaused):
		return fmt.Errorf("%w: %v", ErrNotAcquired, err)
	}
	if s := err.Error(); strings.Contains(s, "requested lease not found") || strings.Contains(s, "etcdserver: no leader") {
		return fmt.Errorf("%w: %v", ErrNotAcquired, err)
	}
	return indeterminate(err)
}

// etcdProbeT reads, over the members' own addresses, the owner of each key: the key under the lock's
// prefix with the lowest create revision. Every member keeps the lease (raft replicates it), so the
// lease's nodes are all the members.
type etcdProbeT struct {
	cli   *clientv3.Client
	nodes []string
}

func etcdProbe(nodes []Node) (ProbeCloser, error) {
	p := &etcdProbeT{}
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr)
		p.nodes = append(p.nodes, n.Name)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: addrs, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd probe: %w", err)
	}
	p.cli = cli
	return p, nil
}

// Leases implements systems.LeaseProbe.
func (p *etcdProbeT) Leases(ctx context.Context, keys []string) []systems.Lease {
	var out []systems.Lease
	for _, key := range keys {
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		r, err := p.cli.Get(cctx, key+"/", clientv3.WithFirstCreate()...)
		cancel()
		if err != nil || len(r.Kvs) == 0 {
			continue
		}
		kv := r.Kvs[0]
		out = append(out, systems.Lease{Key: key, Value: fmt.Sprintf("%s@%d", kv.Key, kv.CreateRevision), Nodes: slices.Clone(p.nodes)})
	}
	return out
}

// Close implements ProbeCloser.
func (p *etcdProbeT) Close() error { return p.cli.Close() }
