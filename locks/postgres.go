package locks

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lockpick-dev/lockpick/systems"
)

// The PostgreSQL locks, through pgx v5 as an application uses it. Each takes the key's lock on
// connections of its own to the one primary (through the client group's link):
//
//   - pg-advisory: pg_try_advisory_lock on a connection kept for the hold. A session lock has no
//     TTL: it lasts as long as the server session does, and ends, without the holder hearing of it,
//     when the session does (its backend terminated, the server restarted). So its leases are open
//     (Kind.Open): the lock promises nothing past the session, and a holder that goes on after the
//     session ended is what the checker finds.
//   - pg-advisory-xact: pg_try_advisory_xact_lock in a transaction kept open for the hold, committed
//     by the release. The same promise: it lasts while the transaction does.
//   - pg-lease: a lease table: the row of the key is taken by an UPDATE that only succeeds once the
//     last lease has expired by the server's clock (now()); each grant increments the row's token,
//     the fencing token. The lease promises its TTL counted from the acquire's first request.

// pgLeaseTable is the lease table of pg-lease.
const pgLeaseTable = "lockpick_leases"

// pgConnString is the connection string for an endpoint (trust authentication, user postgres).
func pgConnString(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	return fmt.Sprintf("host=%s port=%s user=postgres dbname=postgres sslmode=disable", host, port)
}

// advisoryKey is the 64-bit advisory lock number of a key.
func advisoryKey(key string) int64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return int64(h.Sum64())
}

// pgClassify turns a failed statement into a definite error (the connection was never made) or an
// indeterminate one.
func pgClassify(err error) error {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || pgconn.SafeToRetry(err) {
		return fmt.Errorf("%w: %v", ErrNotAcquired, err)
	}
	return indeterminate(err)
}

// pgConns opens connections to one endpoint and keeps idle ones for the next acquire.
type pgConns struct {
	ep   Endpoint
	opts Options
	// simple: the statements go by the simple protocol, as pgx's users are told to configure it
	// behind PgBouncer's transaction pooling (a prepared statement would land on another session).
	simple bool

	// servers names the servers by their own ports, for the lease's node: the server that granted
	// it, which after a failover is the promoted replica behind the same link.
	servers map[int32]string

	mu   sync.Mutex
	idle []*pgx.Conn
	all  map[*pgx.Conn]bool
}

// pgServers maps the servers' own ports (inet_server_port()) to their node names.
func pgServers(eps []Endpoint) map[int32]string {
	out := map[int32]string{}
	for _, ep := range eps {
		if ep.Role == systems.RolePooler {
			continue
		}
		if _, port, err := net.SplitHostPort(ep.Known); err == nil {
			if n, err := strconv.Atoi(port); err == nil {
				out[int32(n)] = ep.Node
			}
		}
	}
	return out
}

// server is the node whose server listens on port, or the endpoint's node when none is known.
func (p *pgConns) server(port int32) string {
	if n, ok := p.servers[port]; ok {
		return n
	}
	return p.ep.Node
}

// newPGConns connects to the endpoint of node (the primary, or a pooler in front of it).
func newPGConns(eps []Endpoint, o Options, node string) (*pgConns, error) {
	for _, ep := range eps {
		if ep.Node == node {
			return &pgConns{ep: ep, opts: o.withDefaults(), all: map[*pgx.Conn]bool{}, simple: node != pgPrimary, servers: pgServers(eps)}, nil
		}
	}
	return nil, fmt.Errorf("the postgres system has no node %s (a pooler needs Debian's pgbouncer: scripts/install-deps.sh)", node)
}

// pgPrimary is the postgres system's primary.
const pgPrimary = "pg1"

// timeout bounds one statement: a node timeout, at least 250 ms (a backend is a process, slower
// to answer than a Redis command on a loaded machine).
func (p *pgConns) timeout() time.Duration { return max(p.opts.NodeTimeout, 250*time.Millisecond) }

// get takes an idle connection or dials a new one.
func (p *pgConns) get(ctx context.Context) (*pgx.Conn, error) {
	for {
		p.mu.Lock()
		n := len(p.idle)
		if n == 0 {
			p.mu.Unlock()
			break
		}
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		// An idle connection whose session the server ended (it sent FATAL) is dropped, as pgxpool
		// checks a connection before handing it out.
		if err := c.PgConn().CheckConn(); err == nil {
			return c, nil
		}
		p.drop(c)
	}
	cctx, cancel := context.WithTimeout(ctx, max(4*p.timeout(), time.Second))
	defer cancel()
	conn := pgConnString(p.ep.Addr)
	if p.simple {
		conn += " default_query_exec_mode=simple_protocol"
	}
	c, err := pgx.Connect(cctx, conn)
	if err != nil {
		return nil, fmt.Errorf("%w: connect to %s: %v", ErrNotAcquired, p.ep.Node, err)
	}
	p.mu.Lock()
	p.all[c] = true
	p.mu.Unlock()
	return c, nil
}

// put gives a healthy connection back; a broken one is closed.
func (p *pgConns) put(c *pgx.Conn, healthy bool) {
	if !healthy || c.IsClosed() {
		p.drop(c)
		return
	}
	p.mu.Lock()
	p.idle = append(p.idle, c)
	p.mu.Unlock()
}

// drop closes a connection, which ends its session and every session lock on it.
func (p *pgConns) drop(c *pgx.Conn) {
	p.mu.Lock()
	delete(p.all, c)
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout())
	defer cancel()
	c.Close(ctx)
}

func (p *pgConns) close() error {
	p.mu.Lock()
	all := p.all
	p.all, p.idle = map[*pgx.Conn]bool{}, nil
	p.mu.Unlock()
	for c := range all {
		ctx, cancel := context.WithTimeout(context.Background(), p.timeout())
		c.Close(ctx)
		cancel()
	}
	return nil
}

// pgAdvisory is pg-advisory and pg-advisory-xact.
type pgAdvisory struct {
	conns *pgConns
	xact  bool

	mu   sync.Mutex
	held map[string]pgHold
}

// pgHold is the connection (and, for a transaction lock, the transaction) a hold keeps.
type pgHold struct {
	conn  *pgx.Conn
	tx    pgx.Tx
	value string
}

func newPGAdvisory(eps []Endpoint, o Options, xact bool, node string) (Locker, error) {
	conns, err := newPGConns(eps, o, node)
	if err != nil {
		return nil, err
	}
	return &pgAdvisory{conns: conns, xact: xact, held: map[string]pgHold{}}, nil
}

func newPGAdvisorySession(eps []Endpoint, o Options) (Locker, error) {
	return newPGAdvisory(eps, o, false, pgPrimary)
}

func newPGAdvisoryXact(eps []Endpoint, o Options) (Locker, error) {
	return newPGAdvisory(eps, o, true, pgPrimary)
}

// newPGAdvisoryBouncer is pg-advisory through PgBouncer in transaction pooling: every statement
// outside a transaction may run on another server session, so the session lock is taken on one
// session and the next client's try runs on the same one (an advisory lock is reentrant within its
// session) or the unlock on another.
func newPGAdvisoryBouncer(eps []Endpoint, o Options) (Locker, error) {
	return newPGAdvisory(eps, o, false, systems.PgBouncerTransaction)
}

// newPGAdvisoryBouncerSession is pg-advisory through PgBouncer in session pooling: a client keeps
// its server session while it is connected, as without the pooler.
func newPGAdvisoryBouncerSession(eps []Endpoint, o Options) (Locker, error) {
	return newPGAdvisory(eps, o, false, systems.PgBouncerSession)
}

// Acquire implements Locker. ttl is not used: an advisory lock has none.
func (a *pgAdvisory) Acquire(ctx context.Context, key string, _ time.Duration) (*Lease, error) {
	start := time.Now()
	c, err := a.conns.get(ctx)
	if err != nil {
		return nil, err
	}
	qctx, cancel := context.WithTimeout(ctx, a.conns.timeout())
	defer cancel()
	h := pgHold{conn: c, value: newValue()}
	var got bool
	var port int32
	if a.xact {
		h.tx, err = c.Begin(qctx)
		if err == nil {
			err = h.tx.QueryRow(qctx, "SELECT pg_try_advisory_xact_lock($1), inet_server_port()", advisoryKey(key)).Scan(&got, &port)
		}
	} else {
		err = c.QueryRow(qctx, "SELECT pg_try_advisory_lock($1), inet_server_port()", advisoryKey(key)).Scan(&got, &port)
	}
	if err != nil {
		// The session is closed with the connection, and its lock, if taken, with it.
		a.conns.drop(c)
		return nil, pgClassify(fmt.Errorf("acquire on %s: %w", a.conns.ep.Node, err))
	}
	if !got {
		if h.tx != nil {
			err = h.tx.Rollback(qctx)
		}
		a.conns.put(c, err == nil)
		return nil, ErrHeld
	}
	a.mu.Lock()
	a.held[key] = h
	a.mu.Unlock()
	return &Lease{Key: key, Value: h.value, Start: start, Nodes: []string{a.conns.server(port)}}, nil
}

// Release implements Locker: unlock (commit) on the hold's own connection.
func (a *pgAdvisory) Release(ctx context.Context, l *Lease) error {
	a.mu.Lock()
	h, ok := a.held[l.Key]
	if ok && h.value == l.Value {
		delete(a.held, l.Key)
	}
	a.mu.Unlock()
	if !ok || h.value != l.Value {
		return ErrLeaseLost
	}
	qctx, cancel := context.WithTimeout(ctx, a.conns.timeout())
	defer cancel()
	var unlocked bool
	var err error
	if h.tx != nil {
		err = h.tx.Commit(qctx)
		unlocked = err == nil
	} else {
		err = h.conn.QueryRow(qctx, "SELECT pg_advisory_unlock($1)", advisoryKey(l.Key)).Scan(&unlocked)
	}
	if err != nil {
		a.conns.drop(h.conn)
		return indeterminate(fmt.Errorf("release on %s: %w", a.conns.ep.Node, err))
	}
	a.conns.put(h.conn, true)
	if !unlocked {
		return ErrLeaseLost
	}
	return nil
}

// Extend implements Locker: an advisory lock has nothing to renew (Kind.NoExtend).
func (a *pgAdvisory) Extend(context.Context, *Lease, time.Duration) (*Lease, error) {
	return nil, errors.New("a PostgreSQL advisory lock has no lease to extend")
}

// Warm implements Warmer: one idle connection.
func (a *pgAdvisory) Warm(ctx context.Context) error {
	c, err := a.conns.get(ctx)
	if err != nil {
		return err
	}
	a.conns.put(c, true)
	return nil
}

// Close implements Locker: closing the connections ends their sessions and their locks.
func (a *pgAdvisory) Close() error { return a.conns.close() }

// pgLease is pg-lease.
type pgLease struct {
	conns *pgConns
}

func newPGLease(eps []Endpoint, o Options) (Locker, error) {
	conns, err := newPGConns(eps, o, pgPrimary)
	if err != nil {
		return nil, err
	}
	return &pgLease{conns: conns}, nil
}

// Statements of pg-lease. A row is made once per key; the grant, the release and the extension
// each act on it only while the lease holds (or, for the grant, once it has expired).
const (
	pgLeaseCreate = "CREATE TABLE IF NOT EXISTS " + pgLeaseTable + " (key text PRIMARY KEY, owner text NOT NULL, token bigint NOT NULL, expires_at timestamptz NOT NULL)"
	pgLeaseRow    = "INSERT INTO " + pgLeaseTable + " (key, owner, token, expires_at) VALUES ($1, '', 0, '-infinity') ON CONFLICT (key) DO NOTHING"
	pgLeaseGrant  = "UPDATE " + pgLeaseTable + " SET owner = $2, token = token + 1, expires_at = now() + $3 * interval '1 microsecond' WHERE key = $1 AND expires_at < now() RETURNING token, inet_server_port()"
	pgLeaseFree   = "UPDATE " + pgLeaseTable + " SET expires_at = '-infinity' WHERE key = $1 AND owner = $2 AND token = $3 AND expires_at >= now()"
	pgLeaseRenew  = "UPDATE " + pgLeaseTable + " SET expires_at = now() + $4 * interval '1 microsecond' WHERE key = $1 AND owner = $2 AND token = $3 AND expires_at >= now()"
)

// pgUndefinedTable is the SQLSTATE of a missing table (a server started again without data).
const pgUndefinedTable = "42P01"

// run runs one statement on a connection of the pool, making the table when it is missing.
func (p *pgLease) run(ctx context.Context, f func(ctx context.Context, c *pgx.Conn) error) error {
	c, err := p.conns.get(ctx)
	if err != nil {
		return err
	}
	for try := 0; ; try++ {
		qctx, cancel := context.WithTimeout(ctx, p.conns.timeout())
		err = f(qctx, c)
		var pe *pgconn.PgError
		if try == 0 && errors.As(err, &pe) && pe.Code == pgUndefinedTable {
			_, err = c.Exec(qctx, pgLeaseCreate)
			cancel()
			if err == nil || (errors.As(err, &pe) && pe.Code == "23505") { // made by another client meanwhile
				continue
			}
		}
		cancel()
		var pgErr *pgconn.PgError
		p.conns.put(c, err == nil || errors.As(err, &pgErr))
		return err
	}
}

// Acquire implements Locker.
func (p *pgLease) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	start := time.Now()
	value := newValue()
	var token int64
	var port int32
	err := p.run(ctx, func(ctx context.Context, c *pgx.Conn) error {
		if _, err := c.Exec(ctx, pgLeaseRow, key); err != nil {
			return err
		}
		return c.QueryRow(ctx, pgLeaseGrant, key, value, ttl.Microseconds()).Scan(&token, &port)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrHeld
	}
	if err != nil {
		if errors.Is(err, ErrNotAcquired) {
			return nil, err
		}
		return nil, pgClassify(fmt.Errorf("acquire on %s: %w", p.conns.ep.Node, err))
	}
	deadline := p.conns.opts.deadline(start, ttl)
	now := time.Now()
	if !deadline.After(now) {
		return nil, indeterminate(fmt.Errorf("validity used up before the reply arrived (token %d)", token))
	}
	return &Lease{Key: key, Value: value, Token: token, Start: start, Deadline: deadline, Validity: deadline.Sub(now),
		Nodes: []string{p.conns.server(port)}}, nil
}

// Release implements Locker.
func (p *pgLease) Release(ctx context.Context, l *Lease) error {
	var n int64
	err := p.run(ctx, func(ctx context.Context, c *pgx.Conn) error {
		tag, err := c.Exec(ctx, pgLeaseFree, l.Key, l.Value, l.Token)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return indeterminate(fmt.Errorf("release on %s: %w", p.conns.ep.Node, err))
	}
	if n == 0 {
		return ErrLeaseLost
	}
	return nil
}

// Extend implements Locker: the holder's row gets ttl more from the server's now, while it holds.
func (p *pgLease) Extend(ctx context.Context, l *Lease, ttl time.Duration) (*Lease, error) {
	start := time.Now()
	if err := stillValid(l, start); err != nil {
		return nil, err
	}
	var n int64
	err := p.run(ctx, func(ctx context.Context, c *pgx.Conn) error {
		tag, err := c.Exec(ctx, pgLeaseRenew, l.Key, l.Value, l.Token, ttl.Microseconds())
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return nil, indeterminate(fmt.Errorf("extend on %s: %w", p.conns.ep.Node, err))
	}
	if n == 0 {
		return nil, ErrLeaseLost
	}
	return renewed(l, p.conns.opts, start, ttl, l.Nodes)
}

// Warm implements Warmer.
func (p *pgLease) Warm(ctx context.Context) error {
	c, err := p.conns.get(ctx)
	if err != nil {
		return err
	}
	p.conns.put(c, true)
	return nil
}

// Close implements Locker.
func (p *pgLease) Close() error { return p.conns.close() }

// pgProbe reads, over each server's own address, which advisory locks are held (by which backend)
// and which lease rows are live: the primary's, and a replica's copy of them.
type pgProbe struct {
	nodes []systems.Node
	mu    sync.Mutex
	conns map[string]*pgx.Conn
}

func newPGProbe(nodes []Node) (ProbeCloser, error) {
	p := &pgProbe{conns: map[string]*pgx.Conn{}}
	for _, n := range nodes {
		if n.Data {
			p.nodes = append(p.nodes, n)
		}
	}
	if len(p.nodes) == 0 {
		return nil, errors.New("postgres probe: no primary")
	}
	return p, nil
}

// Leases implements systems.LeaseProbe: a key's advisory lock (its holder's backend pid) or its
// live lease row (owner and token), on every server that has it. A server that does not answer
// (killed) shows nothing.
func (p *pgProbe) Leases(ctx context.Context, keys []string) []systems.Lease {
	p.mu.Lock()
	defer p.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var out []systems.Lease
	for _, n := range p.nodes {
		for _, l := range p.read(ctx, n, keys) {
			i := slices.IndexFunc(out, func(o systems.Lease) bool { return o.Key == l.Key && o.Value == l.Value })
			if i < 0 {
				out = append(out, l)
				continue
			}
			out[i].Nodes = append(out[i].Nodes, n.Name)
		}
	}
	return out
}

// read reads the leases on one server.
func (p *pgProbe) read(ctx context.Context, n systems.Node, keys []string) []systems.Lease {
	c := p.conns[n.Name]
	if c == nil || c.IsClosed() {
		var err error
		if c, err = pgx.Connect(ctx, pgConnString(n.Addr)); err != nil {
			return nil
		}
		p.conns[n.Name] = c
	}
	var out []systems.Lease
	for _, key := range keys {
		k := uint64(advisoryKey(key))
		var pid int
		err := c.QueryRow(ctx, "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = $1 AND objid = $2 AND objsubid = 1 LIMIT 1",
			int64(k>>32), int64(k&0xffffffff)).Scan(&pid)
		if err == nil {
			out = append(out, systems.Lease{Key: key, Value: "backend " + strconv.Itoa(pid), Nodes: []string{n.Name}})
			continue
		}
		var owner string
		var token int64
		err = c.QueryRow(ctx, "SELECT owner, token FROM "+pgLeaseTable+" WHERE key = $1 AND expires_at >= now()", key).Scan(&owner, &token)
		if err == nil {
			out = append(out, systems.Lease{Key: key, Value: owner + "@" + strconv.FormatInt(token, 10), Nodes: []string{n.Name}})
		}
	}
	return out
}

// Close implements ProbeCloser.
func (p *pgProbe) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close(context.Background())
	}
	clear(p.conns)
	return nil
}
