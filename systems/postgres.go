package systems

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockpick-dev/lockpick/links"
)

// PostgresConfig is the server programs of the postgres system.
type PostgresConfig struct {
	// Bin is the directory of PostgreSQL's programs (postgres, initdb); empty finds Debian's newest.
	Bin string
	// Replicas is how many streaming replicas copy the primary: 0 or 1.
	Replicas int
	// Synchronous makes the primary wait, before a commit returns, until the replica has flushed
	// it (synchronous_standby_names); otherwise replication is asynchronous, PostgreSQL's default.
	Synchronous bool
}

// The postgres system's nodes: the primary, and PgBouncer in front of it in session pooling and in
// transaction pooling (a lock picks the node its clients connect to).
const (
	pgNode = "pg1"
	// PgBouncerSession and PgBouncerTransaction are the poolers' node names.
	PgBouncerSession     = "pgb-session"
	PgBouncerTransaction = "pgb-tx"
)

// RolePooler is a connection pooler in front of the primary.
const RolePooler Role = "pooler"

// pgBouncerProgram is Debian's PgBouncer.
const pgBouncerProgram = "/usr/sbin/pgbouncer"

// pgKeepalives make the server probe an idle client connection after 2 s, every 1 s, and end the
// session after 2 probes go unanswered: a client whose connection went half-open (its packets
// dropped, no FIN or RST) loses its session, and its session locks, about 4 s later, where Linux's
// defaults (7200 s, 75 s, 9) would wait over two hours. Keepalives only probe an idle connection:
// one whose reply (a grant) was dropped in flight retransmits instead, for about 15 minutes
// (tcp_retries2), holding the lock; tcp_user_timeout ends that one after 4 s too.
const pgKeepalives = " -c tcp_keepalives_idle=2 -c tcp_keepalives_interval=1 -c tcp_keepalives_count=2 -c tcp_user_timeout=4000"

// pgReadyLog is what the postmaster logs (to its stderr, the node's stdout.log) once it serves: a
// primary "... ready to accept connections", a hot standby "... ready to accept read-only
// connections".
var pgReadyLog = logLine{file: "stdout.log", text: "database system is ready to accept"}

// pgStartWait bounds a postgres server's start. A replica that replays the WAL of a fresh base
// backup (a failover's rejoin) took over 10 s at load 35 on 2 cores; the bound only ends a hang.
const pgStartWait = time.Minute

// FindPostgres resolves the directory of PostgreSQL's server programs: bin when given, else the
// newest of Debian's /usr/lib/postgresql/*/bin.
func FindPostgres(bin string) (string, error) {
	if bin == "" {
		found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
		if len(found) == 0 {
			return "", errors.New("postgres not found: install it with `apt-get install postgresql` (scripts/install-deps.sh)")
		}
		// Versions sort as numbers: 9 before 15.
		best, bestV := "", -1
		for _, f := range found {
			v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(f))))
			if v > bestV {
				best, bestV = filepath.Dir(f), v
			}
		}
		bin = best
	}
	for _, p := range []string{"postgres", "initdb"} {
		if _, err := os.Stat(filepath.Join(bin, p)); err != nil {
			return "", fmt.Errorf("postgres: %s has no %s: install postgresql", bin, p)
		}
	}
	return bin, nil
}

// postgresTopology is one PostgreSQL primary, optionally with a streaming replica.
type postgresTopology struct{}

// Name implements Topology.
func (postgresTopology) Name() string { return "postgres" }

// Layout implements Topology: one primary, pg1, its replica pg2 when asked for, and the primary's
// two poolers when PgBouncer is installed.
func (postgresTopology) Layout(cfg Config) ([]Node, error) {
	nodes := []Node{{Name: pgNode, Role: RolePrimary, Data: true}}
	for i := range cfg.Postgres.Replicas {
		nodes = append(nodes, Node{Name: fmt.Sprintf("pg%d", i+2), Role: RoleReplica, Data: true})
	}
	if _, err := os.Stat(pgBouncerProgram); err == nil {
		nodes = append(nodes, Node{Name: PgBouncerSession, Role: RolePooler}, Node{Name: PgBouncerTransaction, Role: RolePooler})
	}
	return nodes, nil
}

// Programs implements Topology.
func (postgresTopology) Programs(cfg Config) ([]string, error) {
	if cfg.Backend != "" && cfg.Backend != BackendLocal {
		return nil, fmt.Errorf("the postgres system runs on the local backend only: drop --backend %s", cfg.Backend)
	}
	bin, err := FindPostgres(cfg.Postgres.Bin)
	if err != nil {
		return nil, err
	}
	progs := []string{filepath.Join(bin, "postgres"), filepath.Join(bin, "initdb")}
	if cfg.Postgres.Replicas > 0 {
		if _, err := os.Stat(filepath.Join(bin, "pg_basebackup")); err != nil {
			return nil, fmt.Errorf("postgres: %s has no pg_basebackup, which makes the replica: install postgresql", bin)
		}
		progs = append(progs, filepath.Join(bin, "pg_basebackup"))
	}
	return progs, nil
}

// Clocks implements Topology: the postmaster and its backends read the time through libc
// (gettimeofday, clock_gettime), which the shim moves; now() in SQL is that time.
func (postgresTopology) Clocks() error { return nil }

// Traits implements Topology.
func (postgresTopology) Traits() Traits {
	return Traits{
		// Peers: a replica streams from the primary through a link (with --replicas 1).
		Server: "postgres", Sessions: true, Peers: true,
		DiskIdle: "lockpick runs PostgreSQL with fsync=off, so its servers never wait for their disk",
		NotOn: map[string]string{
			BackendDocker: "postgres runs on --backend local only: drop --backend docker",
			BackendSSH:    "postgres runs on --backend local only: drop --backend ssh",
		},
		Keys:    "the lock's statements touch only advisory locks numbered from these keys and the rows of the table lockpick_leases whose key is one of them",
		Cleanup: "lockpick runs postgres itself; it does not run on someone else's PostgreSQL (%s)",
	}
}

// Size implements Topology: one primary and at most one replica.
func (postgresTopology) Size(s *Size) error {
	switch {
	case s.External:
		return errors.New("--backend external: the postgres system runs its own server: drop --backend")
	case s.Sentinels != 0:
		return fmt.Errorf("--sentinels sizes redis-sentinel, and --lock %s runs on postgres: drop it", s.Lock)
	case s.Replicas < 0 || s.Replicas > 1:
		return fmt.Errorf("--replicas %d: the postgres system runs at most one streaming replica (a failover promotes it): use --replicas 1", s.Replicas)
	case s.Nodes > 1:
		return fmt.Errorf("--nodes %d: the postgres system is one primary: drop --nodes", s.Nodes)
	}
	s.Nodes = 1
	return nil
}

// persistence implements Topology: the primary keeps its data directory across restarts; a start
// without data begins from a fresh initdb.
func (postgresTopology) persistence(Config) Persistence { return "" }

// external implements Topology.
func (postgresTopology) external(context.Context, Config) (System, error) {
	return nil, errors.New("the postgres system runs its own server: drop --backend external")
}

// postgresSys is a PostgreSQL primary, and its replica when asked for, as local child processes,
// reached by every client group through a link (the replica reaches the primary through one too).
type postgresSys struct {
	backend nodeBackend
	links   *links.Set
	nodes   []Node
	groups  []string
	// drops are the packet filter rules of half-open sessions in place, removed by their heal or
	// by Close.
	drops *pgDrops
	// roles follows what each server says it is (pg_is_in_recovery) and which are fenced.
	roles *pgRoles
	// dirs are the servers' node directories.
	dirs map[string]string
}

// start initialises a template cluster once (initdb), declares the primary (whose data directory
// is a copy of the template, made again after a start without data) and starts it, then its
// replicas and poolers.
func (postgresTopology) start(ctx context.Context, b *bed, layout []Node) (_ System, err error) {
	s := &postgresSys{backend: b.backend, links: links.New(), nodes: layout, groups: b.cfg.Groups, drops: &pgDrops{}, dirs: map[string]string{}}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if !b.loopback {
		return nil, errors.New("the postgres system runs on the local backend only: drop --backend")
	}
	cred, err := postgresUser()
	if err != nil {
		return nil, err
	}
	if err := pgInitTemplate(ctx, b.programs[1], b.nodeDir(pgNode), cred); err != nil {
		return nil, err
	}
	if err := s.startPrimary(ctx, b, cred); err != nil {
		return nil, err
	}
	for i := 1; i < len(s.nodes); i++ {
		n := &s.nodes[i]
		switch n.Role {
		case RoleReplica:
			err = s.startReplica(ctx, b, n, cred)
		default:
			err = s.startBouncer(ctx, b, n, cred)
		}
		if err != nil {
			return nil, err
		}
	}
	s.roles = watchPgRoles(s.nodes, b.cfg.Logger)
	return s, nil
}

// pgServerFlags are the flags every server of the family runs with, listening on port.
func pgServerFlags(port string) string {
	return " -p " + port + " -c listen_addresses=127.0.0.1 -c unix_socket_directories= -c fsync=off -c shared_buffers=16MB" +
		" -c max_connections=200 -c log_min_messages=warning -c log_connections=off" + pgKeepalives
}

// startPrimary declares and starts the primary, pg1: synchronous_standby_names names its replicas
// when replication is synchronous.
func (s *postgresSys) startPrimary(ctx context.Context, b *bed, cred *syscall.Credential) error {
	nd := b.nodeDir(pgNode)
	s.dirs[pgNode] = nd
	ports, err := b.reserve(1)
	if err != nil {
		return err
	}
	addr := ports[0].Addr().String()
	s.nodes[0].Addr = addr
	_, port, _ := net.SplitHostPort(addr)
	script := pgServerScript(b.programs, port, pgSyncNames(b.cfg.Postgres, s.nodes, pgNode))
	spec := nodeSpec{name: pgNode, dir: nd, cmd: []string{"/bin/sh", "-c", script}, addr: addr, reserved: ports[0],
		data: []string{filepath.Join(nd, "data")}, cred: cred, group: true, shim: true, readyLog: pgReadyLog, startWait: pgStartWait,
		ready: func(ctx context.Context) error { return pgAnswers(ctx, addr) }}
	if _, err := b.t.add(ctx, spec); err != nil {
		return err
	}
	if err := s.addClientLinks(pgNode, addr); err != nil {
		return err
	}
	if err := s.backend.Start(ctx, pgNode); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	return nil
}

// addClientLinks adds a link from every client group to node at addr.
func (s *postgresSys) addClientLinks(node, addr string) error {
	for _, g := range s.groups {
		if _, err := s.links.Add(g, node, addr); err != nil {
			return err
		}
	}
	return nil
}

// startBouncer declares and starts a PgBouncer node in front of the primary, pooling sessions or
// transactions as its name says. It reaches the primary through a link of its own (its name is the
// link's group), which a failover moves to the promoted replica as it moves the clients' paths.
// Transaction pooling gets a small pool (3 server connections), so that clients share server
// sessions as they do in production; session pooling one large enough for every client (a session
// is held while its client is connected).
func (s *postgresSys) startBouncer(ctx context.Context, b *bed, n *Node, cred *syscall.Credential) error {
	mode, pool := "session", 100
	if n.Name == PgBouncerTransaction {
		mode, pool = "transaction", 3
	}
	ports, err := b.reserve(1)
	if err != nil {
		return err
	}
	n.Addr = ports[0].Addr().String()
	_, port, _ := net.SplitHostPort(n.Addr)
	server, err := s.links.Add(n.Name, pgNode, s.nodes[0].Addr)
	if err != nil {
		return err
	}
	_, pgPort, _ := net.SplitHostPort(server.Addr)
	nd := b.nodeDir(n.Name)
	if err := ownedDir(nd, cred); err != nil {
		return fmt.Errorf("pgbouncer node directory: %w", err)
	}
	ini := fmt.Sprintf(`[databases]
postgres = host=127.0.0.1 port=%s dbname=postgres user=postgres
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %s
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = %s
default_pool_size = %d
max_client_conn = 500
logfile = %s
pidfile =
server_login_retry = 1
`, pgPort, port, filepath.Join(nd, "userlist.txt"), mode, pool, filepath.Join(nd, "pgbouncer.log"))
	for name, body := range map[string]string{"pgbouncer.ini": ini, "userlist.txt": "\"postgres\" \"\"\n"} {
		if err := os.WriteFile(filepath.Join(nd, name), []byte(body), 0o644); err != nil {
			return fmt.Errorf("pgbouncer %s: %w", name, err)
		}
	}
	addr := n.Addr
	spec := nodeSpec{name: n.Name, dir: nd, cmd: []string{pgBouncerProgram, filepath.Join(nd, "pgbouncer.ini")}, addr: addr,
		reserved: ports[0], cred: cred, readyLog: logLine{file: "pgbouncer.log", text: "process up"},
		ready: func(ctx context.Context) error { return pgAnswers(ctx, addr) }}
	if _, err := b.t.add(ctx, spec); err != nil {
		return err
	}
	for _, g := range b.cfg.Groups {
		if _, err := s.links.Add(g, n.Name, addr); err != nil {
			return err
		}
	}
	if err := s.backend.Start(ctx, n.Name); err != nil {
		return fmt.Errorf("start pgbouncer (%s pooling): %w", mode, err)
	}
	return nil
}

// postgresUser is the user the server runs as: PostgreSQL refuses to run as root, so a harness
// running as root runs it as Debian's postgres user; otherwise as the harness's own user (nil).
func postgresUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("postgres refuses to run as root, and there is no postgres user to run it as: install postgresql (it makes one): %w", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// ownedDir makes the directory dir, owned by the server's user when it runs as another (cred).
func ownedDir(dir string, cred *syscall.Credential) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if cred == nil {
		return nil
	}
	return os.Chown(dir, int(cred.Uid), int(cred.Gid))
}

// pgInitTemplate makes the node's directory, owned by the server's user, and a fresh cluster in
// its template directory (trust authentication on loopback, user postgres).
func pgInitTemplate(ctx context.Context, initdb, nd string, cred *syscall.Credential) error {
	if err := ownedDir(nd, cred); err != nil {
		return fmt.Errorf("postgres node directory: %w", err)
	}
	if cred != nil {
		if err := reachable(nd, cred); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, initdb, "-D", filepath.Join(nd, "template"), "-U", "postgres",
		"--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	cmd.Dir = nd
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w: %s", err, tail(string(out), 500))
	}
	return nil
}

// reachable checks that the server's user can reach dir: every directory above it must let others
// search it (a test's temporary directory does not).
func reachable(dir string, cred *syscall.Credential) error {
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if ok && fi.Mode().Perm()&0o001 == 0 && st.Uid != cred.Uid {
			return fmt.Errorf("postgres runs as user postgres, which cannot enter %s: make it searchable (chmod o+x %s) or run from another directory", d, d)
		}
		if d == "/" {
			return nil
		}
	}
}

// pgConnString is the harness's connection string of database postgres at addr as user postgres.
func pgConnString(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	// The simple protocol: a prepared statement would not survive transaction pooling.
	return fmt.Sprintf("host=%s port=%s user=postgres dbname=postgres sslmode=disable connect_timeout=2 default_query_exec_mode=simple_protocol", host, port)
}

// pgAnswers runs SELECT 1 on a fresh connection to addr.
func pgAnswers(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, pgConnString(addr))
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	var one int
	return c.QueryRow(ctx, "SELECT 1").Scan(&one)
}

// Name implements System.
func (s *postgresSys) Name() string { return "postgres" }

// Nodes implements System.
func (s *postgresSys) Nodes() []Node { return append([]Node(nil), s.nodes...) }

// Roles implements System: what each server last said it is (pg_is_in_recovery()), and fenced
// for a former primary a failover replaced.
func (s *postgresSys) Roles() map[string]Role { return s.roles.current() }

// Endpoints implements System.
func (s *postgresSys) Endpoints(group string) ([]Endpoint, error) {
	return groupEndpoints(s.links, group, s.nodes, func(n Node) string { return n.Addr })
}

// Links implements System.
func (s *postgresSys) Links() *links.Set { return s.links }

// Backend implements System.
func (s *postgresSys) Backend() Backend { return s.backend }

// Watch implements System: the changes of the roles the servers report.
func (s *postgresSys) Watch(f func(Event)) { s.roles.subscribe(f) }

// HoldWrites implements System.
func (s *postgresSys) HoldWrites(context.Context, string, time.Duration, func(context.Context) error) error {
	return errors.New("postgres cannot hold writes back")
}

// Ping implements System.
func (s *postgresSys) Ping(ctx context.Context, node string) error {
	for _, n := range s.nodes {
		if n.Name == node {
			return pgAnswers(ctx, n.Addr)
		}
	}
	return fmt.Errorf("no node %q", node)
}

// Close implements System.
func (s *postgresSys) Close() error {
	var errs []error
	if s.roles != nil {
		errs = append(errs, s.roles.close())
	}
	s.links.Close()
	return errors.Join(append(errs, s.drops.removeAll(context.Background()), s.backend.Close())...)
}

// PostgresAdmin opens the harness's own connection to the server at addr (its own address, past
// every link), for faults that act on sessions (pg_terminate_backend).
func PostgresAdmin(ctx context.Context, addr string) (*pgx.Conn, error) {
	c, err := pgx.Connect(ctx, pgConnString(addr)+" application_name=lockpick-admin")
	if err != nil {
		return nil, fmt.Errorf("postgres admin connection to %s: %w", addr, err)
	}
	return c, nil
}

// SessionEnder is a system whose servers can end their clients' sessions.
type SessionEnder interface {
	// EndSessions ends, on node, the sessions of the clients that hold a lock (an advisory lock),
	// or, when none does, every client session; it returns the process ids of the sessions ended.
	EndSessions(ctx context.Context, node string) ([]int, error)
	// BlackholeSessions drops, below every proxy of the harness, every packet both ways of the
	// connections of the same sessions EndSessions would end, with no FIN or RST: the sessions'
	// connections go half-open. It returns the sessions' process ids and the heal that removes the
	// drop.
	BlackholeSessions(ctx context.Context, node string) ([]int, func(context.Context) error, error)
}

// pgSessionTargets lists the backends that hold advisory locks, or, when none does, every other
// client backend (a lease table's holders keep no session of their own); the harness's own
// connections (application_name lockpick-admin) are never among them.
const pgSessionTargets = `WITH holders AS (
	SELECT DISTINCT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
	WHERE l.locktype = 'advisory' AND l.granted AND a.application_name <> 'lockpick-admin'
)
SELECT pid FROM holders
UNION ALL
SELECT pid FROM pg_stat_activity
WHERE backend_type = 'client backend' AND application_name <> 'lockpick-admin' AND NOT EXISTS (SELECT 1 FROM holders)`

// pgSessionPorts are pgSessionTargets' process ids with the client port of each session's
// connection (the port of the link's connection to the server).
const pgSessionPorts = `SELECT pid, client_port FROM pg_stat_activity WHERE client_port IS NOT NULL AND pid IN (` + pgSessionTargets + `)`

// EndSessions implements SessionEnder, over the primary's own address.
func (s *postgresSys) EndSessions(ctx context.Context, node string) ([]int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := s.admin(ctx, node)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	rows, err := c.Query(ctx, pgSessionTargets)
	if err != nil {
		return nil, fmt.Errorf("list sessions on %s: %w", node, err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("list sessions on %s: %w", node, err)
	}
	var ended []int
	for _, pid := range pids {
		var ok bool
		if err := c.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&ok); err != nil {
			return ended, fmt.Errorf("terminate session %d on %s: %w", pid, node, err)
		}
		if ok {
			ended = append(ended, int(pid))
		}
	}
	return ended, nil
}

// admin opens the harness's own connection to node, a server (not a pooler).
func (s *postgresSys) admin(ctx context.Context, node string) (*pgx.Conn, error) {
	n := s.node(node)
	if n == nil || !n.Data {
		return nil, fmt.Errorf("no server %q", node)
	}
	return PostgresAdmin(ctx, n.Addr)
}

// BlackholeSessions implements SessionEnder: the server's end of each chosen session's connection
// is known by its ports (the server's, and the client port pg_stat_activity gives), so packet
// filter rules on the loopback interface drop that one connection's packets and no other's.
func (s *postgresSys) BlackholeSessions(ctx context.Context, node string) ([]int, func(context.Context) error, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := s.admin(ctx, node)
	if err != nil {
		return nil, nil, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	rows, err := c.Query(ctx, pgSessionPorts)
	if err != nil {
		return nil, nil, fmt.Errorf("list sessions on %s: %w", node, err)
	}
	type session struct{ Pid, ClientPort int32 }
	found, err := pgx.CollectRows(rows, pgx.RowToStructByPos[session])
	if err != nil {
		return nil, nil, fmt.Errorf("list sessions on %s: %w", node, err)
	}
	_, port, _ := net.SplitHostPort(s.node(node).Addr)
	var pids []int
	var rules [][]string
	for _, f := range found {
		pids = append(pids, int(f.Pid))
		rules = append(rules, pgDropRules(port, strconv.Itoa(int(f.ClientPort)))...)
	}
	heal, err := s.drops.add(ctx, rules)
	return pids, heal, err
}
