package systems

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// RoleFenced is a former primary that a failover replaced: kept down, and no client's path leads
// to it any more.
const RoleFenced Role = "fenced"

// Promoter is a system whose replica a failover promotes itself, as a failover manager (Patroni,
// repmgr, a cloud's managed failover) does for PostgreSQL, where no sentinel does it.
type Promoter interface {
	// Promote fences old (its role becomes RoleFenced), promotes replica to primary and moves
	// every client's path to old onto replica, as a virtual IP or a DNS name moved to it would. It
	// returns what it did, in a sentence.
	Promote(ctx context.Context, old, replica string) (string, error)
	// Rejoin starts the fenced node again, without its data, as a replica of primary (a fresh base
	// backup: its own timeline may have diverged), as a failover manager rebuilds an old primary.
	Rejoin(ctx context.Context, node, primary string) (string, error)
}

// pgSyncNames is a server's synchronous_standby_names: the other servers, by the application name
// each replicates with (its node name), when replication is synchronous; empty otherwise. A
// standby ignores it; it takes effect on whichever server is primary.
func pgSyncNames(cfg PostgresConfig, nodes []Node, self string) string {
	if !cfg.Synchronous {
		return ""
	}
	var names []string
	for _, n := range nodes {
		if n.Data && n.Name != self {
			names = append(names, n.Name)
		}
	}
	return strings.Join(names, ",")
}

// pgUpstream is the file in a server's node directory that holds, while the server is a replica,
// its connection string to the primary (through its link); without it a missing data directory is
// a copy of the template.
const pgUpstream = "upstream"

// pgServerScript is the shell script that runs a server. A missing data directory is a copy of the
// template, or, when the node has an upstream, a base backup of the primary taken through the
// node's link to it (pg_basebackup -R writes standby.signal); a replica streams through that link
// too, so that a fault on the link cuts or stalls replication.
func pgServerScript(programs []string, port, syncNames string) string {
	script := "if test ! -d data; then if test -f " + pgUpstream + "; then "
	if len(programs) > 2 {
		script += programs[2] + ` -d "$(cat ` + pgUpstream + `)" -D data -R -X stream --no-sync -c fast || { rm -rf data; exit 1; }; `
	} else {
		script += "exit 1; "
	}
	script += "else cp -a template data; fi; fi; set --; test -f " + pgUpstream + ` && set -- -c "primary_conninfo=$(cat ` + pgUpstream + `)"; ` +
		"exec " + programs[0] + " -D data" + pgServerFlags(port) + " -c hot_standby=on"
	if syncNames != "" {
		script += " -c synchronous_standby_names=" + syncNames
	}
	return script + ` "$@"`
}

// setUpstream makes node a replica of primary at its next start without data: its upstream is its
// link to primary.
func (s *postgresSys) setUpstream(node, primary, dir string) error {
	l, err := s.links.Get(node, primary)
	if err != nil {
		return err
	}
	host, port, _ := net.SplitHostPort(l.Addr)
	conninfo := fmt.Sprintf("host=%s port=%s user=postgres application_name=%s", host, port, node)
	if err := os.WriteFile(filepath.Join(dir, pgUpstream), []byte(conninfo), 0o644); err != nil {
		return fmt.Errorf("postgres %s upstream: %w", node, err)
	}
	return nil
}

// startReplica declares and starts a streaming replica of the primary, pg1.
func (s *postgresSys) startReplica(ctx context.Context, b *bed, n *Node, cred *syscall.Credential) error {
	nd := b.nodeDir(n.Name)
	s.dirs[n.Name] = nd
	if err := ownedDir(nd, cred); err != nil {
		return fmt.Errorf("postgres replica directory: %w", err)
	}
	ports, err := b.reserve(1)
	if err != nil {
		return err
	}
	addr := ports[0].Addr().String()
	n.Addr = addr
	_, port, _ := net.SplitHostPort(addr)
	// A link each way: the replica streams from the primary, and after a failover the old primary
	// rejoins as the replica of the promoted one.
	if _, err := s.links.Add(n.Name, pgNode, s.nodes[0].Addr); err != nil {
		return err
	}
	if _, err := s.links.Add(pgNode, n.Name, addr); err != nil {
		return err
	}
	if err := s.setUpstream(n.Name, pgNode, nd); err != nil {
		return err
	}
	script := pgServerScript(b.programs, port, pgSyncNames(b.cfg.Postgres, s.nodes, n.Name))
	spec := nodeSpec{name: n.Name, dir: nd, cmd: []string{"/bin/sh", "-c", script},
		addr: addr, reserved: ports[0], data: []string{filepath.Join(nd, "data")}, cred: cred, group: true, shim: true,
		readyLog: pgReadyLog, startWait: pgStartWait, ready: func(ctx context.Context) error { return pgAnswers(ctx, addr) }}
	if _, err := b.t.add(ctx, spec); err != nil {
		return err
	}
	if err := s.addClientLinks(n.Name, addr); err != nil {
		return err
	}
	if err := s.backend.Start(ctx, n.Name); err != nil {
		return fmt.Errorf("start postgres replica %s: %w", n.Name, err)
	}
	return nil
}

// Promote implements Promoter: old is fenced first (so that nothing reports two primaries), the
// replica is promoted with pg_promote(), which returns once it accepts writes, and then every
// client group's link to old, and every pooler's, is pointed at the replica.
func (s *postgresSys) Promote(ctx context.Context, old, replica string) (string, error) {
	from, to := s.node(old), s.node(replica)
	if from == nil || to == nil || !from.Data || !to.Data {
		return "", fmt.Errorf("promote %s in place of %s: no such servers", replica, old)
	}
	s.roles.fence(old)
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	c, err := PostgresAdmin(ctx, to.Addr)
	if err != nil {
		return "", err
	}
	defer c.Close(context.WithoutCancel(ctx))
	var promoted bool
	if err := c.QueryRow(ctx, "SELECT pg_promote(true, 10)").Scan(&promoted); err != nil || !promoted {
		return "", fmt.Errorf("pg_promote on %s: promoted %v: %w", replica, promoted, err)
	}
	var moved []string
	for _, g := range append(s.poolers(), s.groups...) {
		for _, n := range s.nodes {
			l, err := s.links.Get(g, n.Name)
			if err != nil || l.CurrentUpstream() != from.Addr {
				continue
			}
			if err := s.links.Retarget(l, to.Addr); err != nil {
				return "", err
			}
			moved = append(moved, l.Name())
		}
	}
	s.roles.update(ctx)
	return fmt.Sprintf("%s promoted (pg_promote), %s fenced; the clients' paths %s that led to %s now lead to %s",
		replica, old, strings.Join(moved, " "), old, replica), nil
}

// Rejoin implements Promoter: node's upstream becomes its link to primary, and it starts without
// its data, from a base backup of primary.
func (s *postgresSys) Rejoin(ctx context.Context, node, primary string) (string, error) {
	n, p := s.node(node), s.node(primary)
	if n == nil || p == nil || !n.Data || !p.Data {
		return "", fmt.Errorf("rejoin %s as a replica of %s: no such servers", node, primary)
	}
	if s.backend.Running(node) {
		if err := s.backend.Kill(node); err != nil {
			return "", err
		}
	}
	if err := s.setUpstream(node, primary, s.dirs[node]); err != nil {
		return "", err
	}
	if err := s.backend.StartEmpty(ctx, node); err != nil {
		return "", fmt.Errorf("rejoin %s as a replica of %s: %w", node, primary, err)
	}
	s.roles.unfence(node)
	s.roles.update(ctx)
	return fmt.Sprintf("%s rejoined as a replica of %s (a fresh pg_basebackup)", node, primary), nil
}

// poolers are the names of the pooler nodes: each reaches the primary through a link of its own.
func (s *postgresSys) poolers() []string {
	var names []string
	for _, n := range s.nodes {
		if n.Role == RolePooler {
			names = append(names, n.Name)
		}
	}
	return names
}

// node is the node named name, or nil.
func (s *postgresSys) node(name string) *Node {
	for i := range s.nodes {
		if s.nodes[i].Name == name {
			return &s.nodes[i]
		}
	}
	return nil
}

// pgRolesEvery is how often each server is asked whether it is in recovery.
const pgRolesEvery = 100 * time.Millisecond

// pgRoles keeps the roles the servers report: primary when pg_is_in_recovery() is false, replica
// when true; a server that does not answer keeps the role it last reported, and a fenced one is
// fenced. Each server is asked over its own address, past every link: a fault on a path must not
// blind the harness.
type pgRoles struct {
	roleBoard
	nodes []Node

	mu     sync.Mutex // guards fenced; taken inside the board's lock, never around it
	fenced map[string]bool
	conns  map[string]*pgx.Conn
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// asking serialises the rounds of questions (the ticker's and a promotion's).
	asking sync.Mutex
}

func watchPgRoles(nodes []Node, log *slog.Logger) *pgRoles {
	ctx, cancel := context.WithCancel(context.Background())
	r := &pgRoles{roleBoard: newRoleBoard("postgres", nodes, log), nodes: nodes, fenced: map[string]bool{}, conns: map[string]*pgx.Conn{}, cancel: cancel}
	r.update(ctx)
	r.wg.Go(func() { tickUntilDone(ctx, pgRolesEvery, r.update) })
	return r
}

// fence marks node fenced and announces it.
func (r *pgRoles) fence(node string) {
	r.mu.Lock()
	r.fenced[node] = true
	r.mu.Unlock()
	r.set(map[string]Role{node: RoleFenced})
}

// unfence lets node's own answer give its role again.
func (r *pgRoles) unfence(node string) {
	r.mu.Lock()
	delete(r.fenced, node)
	r.mu.Unlock()
}

// update asks every data server that is not fenced what it is, and announces the changes.
func (r *pgRoles) update(ctx context.Context) {
	r.asking.Lock()
	defer r.asking.Unlock()
	now := map[string]Role{}
	for _, n := range r.nodes {
		r.mu.Lock()
		skip := !n.Data || r.fenced[n.Name]
		r.mu.Unlock()
		if skip {
			continue
		}
		if role, ok := r.ask(ctx, n); ok {
			now[n.Name] = role
		}
	}
	r.set(now)
}

// ask asks one server whether it is in recovery, on a connection kept for the purpose.
func (r *pgRoles) ask(ctx context.Context, n Node) (Role, bool) {
	ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	c := r.conns[n.Name]
	if c == nil || c.IsClosed() {
		var err error
		if c, err = PostgresAdmin(ctx, n.Addr); err != nil {
			return "", false
		}
		r.conns[n.Name] = c
	}
	var recovering bool
	if err := c.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovering); err != nil {
		c.Close(context.WithoutCancel(ctx))
		delete(r.conns, n.Name)
		return "", false
	}
	if recovering {
		return RoleReplica, true
	}
	return RolePrimary, true
}

// set records roles and announces the ones that changed (a fenced node stays fenced).
func (r *pgRoles) set(roles map[string]Role) {
	r.change(func(board map[string]Role) map[string]Role {
		r.mu.Lock()
		defer r.mu.Unlock()
		changed := map[string]Role{}
		for n, role := range roles {
			if r.fenced[n] {
				role = RoleFenced
			}
			if board[n] != role {
				board[n] = role
				changed[n] = role
			}
		}
		return changed
	})
}

// close stops asking and closes the connections.
func (r *pgRoles) close() error {
	r.cancel()
	r.wg.Wait()
	r.asking.Lock()
	defer r.asking.Unlock()
	var errs []error
	for _, c := range r.conns {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		errs = append(errs, c.Close(ctx))
		cancel()
	}
	clear(r.conns)
	return errors.Join(errs...)
}
