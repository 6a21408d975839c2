package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockpick-dev/lockpick/harness"
	"github.com/lockpick-dev/lockpick/locks"
	"github.com/lockpick-dev/lockpick/systems"
)

// Row groups of a card. Only the lock's own rows decide its exit code.
const (
	// groupLock rows test the lock's own promise: no two holders, no lease lost before its deadline.
	groupLock = "lock"
	// groupInherent rows break with any lease lock: they show what the application must add.
	groupInherent = "inherent"
	// groupRemedy rows change one thing about a row the lock may break, to show how to avoid it.
	groupRemedy = "remedy"
)

// cardRow is one row of a card's battery: a change to the base run, named by what it does to the
// lock. The battery is derived from what the lock declares (batteryFor), never written per lock.
type cardRow struct {
	id    string // the headline's word and the run's name: "restart", "clock-forward"
	what  string // what the row does to the lock, in words
	group string
	// remedies is the id of the row this one remedies, and remedy the advice it proves when it
	// kept its promise; must is what the application must add, for an inherent row.
	remedies, remedy, must string
	// skip says why the row cannot run on this lock, system or backend; empty when it runs.
	skip  string
	shape func(c *harness.Config)
}

// Settings the battery shares. A TTL of 1.5 s is not a whole number of seconds, so a lease sent in
// whole seconds is shorter than promised (the self-test's cells, docs/edge.md).
const (
	cardTTL        = 1500 * time.Millisecond
	cardEdgeLimit  = 8 * time.Second  // fault phase of a lease-edge row
	cardFaultLimit = 15 * time.Second // fault phase of a fault row: four or five faults
	cardInterval   = 3 * time.Second  // mean time between faults of a fault row
)

// plainRow is the row that does nothing to the lock but use it.
const plainRow = "deadline"

// cardBase is the run every row of lock changes: the self-test's shape (ten clients on three keys,
// holds drawn across the validity), stopping at the first violation.
func cardBase(lock harness.Config) harness.Config {
	c := lock
	c.Clients, c.Keys, c.TTL = 10, 3, harness.Duration(cardTTL)
	if k, err := cardKind(c); err == nil && (k.WholeSeconds || c.System == "etcd" || k.System == "etcd") {
		// go-zero takes whole seconds; etcd's sessions count their TTL in whole seconds.
		c.TTL = harness.Duration(2 * time.Second)
	}
	if s := sessionTTL(c); s > time.Duration(c.TTL) {
		c.TTL = harness.Duration(s)
	}
	c.TimeLimit, c.Recovery = harness.Duration(cardEdgeLimit), harness.Duration(time.Second)
	c.StopAtFirst, c.Nemesis = true, "none"
	return c
}

// sessionTTL is the shortest session timeout a card runs the lock's family at, zero when its TTL
// is no session's timeout.
func sessionTTL(c harness.Config) time.Duration {
	system := c.System
	if k, err := cardKind(c); err == nil && system == "" {
		system = k.System
	}
	t, err := systems.Lookup(system)
	if err != nil {
		return 0
	}
	return t.Traits().SessionTTL
}

// cardKind is the lock's kind, with the capabilities a client program declared.
func cardKind(c harness.Config) (locks.Kind, error) {
	k, err := locks.Lookup(c.Lock)
	if err != nil || c.Lock != locks.ClientLock {
		return k, err
	}
	return locks.WithCapabilities(k, c.ClientCaps), nil
}

// batteryFor derives the rows of a card from what the lock of base declares (its system and data
// nodes after resolution), each row checked against the system and backend: a row they cannot run
// keeps the reason in skip. base must resolve.
func batteryFor(base harness.Config) ([]cardRow, error) {
	r := base
	if err := r.Resolve(); err != nil {
		return nil, err
	}
	k, err := cardKind(base)
	if err != nil {
		return nil, err
	}
	t := traits{kind: k, system: r.System, nodes: len(r.NodeNames()), replicas: r.Replicas, ttl: time.Duration(base.TTL), sessions: sessionsOf(r.System), sessionTTL: sessionTTL(r)}
	rows := append(edgeRows(t), faultRows(t)...)
	rows = append(rows, resourceRows(t)...)
	for i := range rows {
		if rows[i].skip != "" {
			continue
		}
		c := rows[i].config(base)
		if err := c.Resolve(); err != nil {
			rows[i].skip = "cannot run here: " + err.Error()
		}
	}
	return rows, nil
}

// traits are what a battery is derived from.
type traits struct {
	kind   locks.Kind
	system string
	nodes  int // data nodes
	// replicas: streaming replicas of a postgres primary (--replicas), which a failover promotes.
	replicas int
	ttl      time.Duration
	// sessions: a client's session is its connection (PostgreSQL), so a partition must stall the
	// connection as TCP does, not close it at the heal (partition mode drop), or the heal ends the
	// session and every lock it held, which no real partition of seconds does.
	sessions bool
	// sessionTTL: the TTL is a client session's timeout, at least this long (ZooKeeper).
	sessionTTL time.Duration
}

// sessionsOf says whether the system's sessions are its clients' connections.
func sessionsOf(system string) bool {
	t, err := systems.Lookup(system)
	return err == nil && t.Traits().Sessions
}

// cutMode is the partition mode of the card's partition rows.
func cutMode(t traits) string {
	if t.sessions {
		return "stall"
	}
	return "drop"
}

// config is the row's run: base changed by the row.
func (row cardRow) config(base harness.Config) harness.Config {
	c := base
	c.Name = cardName(base) + "-" + row.id
	row.shape(&c)
	return c
}

// cardName names a card and its runs in the store: card-LOCK, or for a client program
// card-PROGRAM after the program's last word (card-redis_lock.py), so that the cards of two
// programs keep their runs apart.
func cardName(base harness.Config) string {
	if base.Lock != locks.ClientLock || len(base.ClientCmd) == 0 {
		return "card-" + base.Lock
	}
	prog := filepath.Base(base.ClientCmd[len(base.ClientCmd)-1])
	return "card-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._+-", r) {
			return r
		}
		return '-'
	}, strings.TrimLeft(prog, "."))
}

// faulty makes c a fault row: longer, with faults every cardInterval and nemesis n.
func faulty(c *harness.Config, n string) {
	c.TimeLimit, c.Recovery, c.Interval = harness.Duration(cardFaultLimit), harness.Duration(3*time.Second), harness.Duration(cardInterval)
	c.Nemesis = n
}

// slowGroup is the self-test's slow group: client group c2's links slowed to about half the TTL,
// with a node timeout to match (to one node when there are three or more, so a quorum still
// answers quickly): its acquires and releases take long, and group turns let it win its share.
func slowGroup(c *harness.Config, t traits) {
	target := "all"
	if t.nodes >= 3 && t.system == "redis-masters" {
		target = "minority"
	}
	ttl := time.Duration(c.TTL)
	c.ClientGroups, c.NodeTimeout = 2, harness.Duration((ttl * 3 / 5).Round(time.Millisecond))
	c.Nemesis = fmt.Sprintf("latency:group=c2:target=%s:mode=steady:delay=%v:duration=2s:interval=500ms", target, (ttl * 7 / 15).Round(10*time.Millisecond))
}

// edgeRows are the lease-edge rows: holds that end at the deadline, and everything that moves the
// deadline a little (the self-test's cells, docs/edge.md).
func edgeRows(t traits) []cardRow {
	k := t.kind
	rows := []cardRow{
		{id: "deadline", what: "holds that reach the lease's deadline (no fault; 30% end in its last fifth, 10% overrun it)", shape: func(c *harness.Config) {}},
		{id: "slow-group", what: "a slow client group: its links slowed to half the TTL, near the node timeout", shape: func(c *harness.Config) { slowGroup(c, t) }},
		{id: "node-timeouts", what: "node timeouts: a client group's requests time out and land late (latency spikes)", shape: func(c *harness.Config) {
			c.ClientGroups = 2
			c.Nemesis = "latency:group=c2:target=all:mode=spike:duration=1s:interval=1s"
		}},
		{id: "drift", what: "node clocks run 0.8% fast, inside the Redlock drift allowance", shape: func(c *harness.Config) {
			c.ThinkMax, c.TimeLimit = harness.Duration(5*time.Millisecond), harness.Duration(2*cardEdgeLimit)
			c.Nemesis = "clock:jump=fast:rate=0.008:target=all:duration=" + (2*cardEdgeLimit - time.Second).String() + ":interval=200ms"
		}},
		{id: "client-clock-ahead", what: "every client's wall clock a TTL ahead for 3 s at a time; holds up to two TTLs", shape: func(c *harness.Config) {
			c.HoldMax, c.ThinkMax = 2*c.TTL, harness.Duration(5*time.Millisecond)
			c.Nemesis = fmt.Sprintf("client-clock:target=all:offset=%v:duration=3s:interval=1s", time.Duration(c.TTL))
		}},
		{id: "client-clock-behind", what: "every client's wall clock two TTLs behind for 3 s at a time; holds up to two TTLs", shape: func(c *harness.Config) {
			c.HoldMax, c.ThinkMax = 2*c.TTL, harness.Duration(5*time.Millisecond)
			c.Nemesis = fmt.Sprintf("client-clock:target=all:jump=back:offset=%v:duration=3s:interval=1s", 2*time.Duration(c.TTL))
		}},
		{id: "fractional-ttl", what: "a TTL under a second (750 ms): a lease sent in whole seconds is none at all", shape: func(c *harness.Config) {
			c.TTL, c.ThinkMax = harness.Duration(750*time.Millisecond), harness.Duration(5*time.Millisecond)
		}},
		{id: "extend", what: "holders extend their lease when a third of it is left, one extend in five late", shape: func(c *harness.Config) { c.Extend = true }},
		{id: "extend-slow", what: "extends from a slow client group, its links slowed to near the node timeout", shape: func(c *harness.Config) {
			slowGroup(c, t)
			c.Extend = true
		}},
		// Holds up to two TTLs, so that some re-entries come after the lease's deadline: a lock that
		// answers a re-entry from its own memory grants a lease another client may hold by then.
		{id: "reentry", what: "holders enter the lock again inside holds of up to two TTLs; refused clients unlock keys they do not hold", shape: func(c *harness.Config) {
			c.Reentrant, c.Keys = true, 1
			c.HoldMax, c.ThinkMax = 2*c.TTL, harness.Duration(5*time.Millisecond)
		}},
	}
	for i := range rows {
		rows[i].group = groupLock
		switch id := rows[i].id; {
		case id == "fractional-ttl" && k.WholeSeconds:
			rows[i].skip = "the lock takes its TTL in whole seconds"
		case id == "fractional-ttl" && t.system == "etcd":
			rows[i].skip = "etcd counts a session's TTL in whole seconds"
		case id == "fractional-ttl" && t.sessionTTL > 0:
			rows[i].skip = fmt.Sprintf("the TTL is %s's session timeout, sent in milliseconds: no lease is sent in whole seconds, and a session under %v ends whenever a loaded machine stalls a member", t.system, t.sessionTTL)
		case strings.HasPrefix(id, "client-clock") && !k.ClientClockReaches():
			rows[i].skip = "the lock runs inside lockpick and reads Go's own clock, which the client-clock fault does not move (it moves Options.Clock and client programs' wall clocks): the row would judge runs the fault never touched"
		case (id == "extend" || id == "extend-slow") && k.NoExtend:
			rows[i].skip = noExtend(k)
		case id == "reentry" && !k.Reentrant:
			rows[i].skip = notReentrant(k)
		}
	}
	return rows
}

func noExtend(k locks.Kind) string {
	if k.Name == locks.ClientLock {
		return "the program declares no extend: add --client-capabilities extend if it renews on request"
	}
	return "the lock offers no extend on request"
}

func notReentrant(k locks.Kind) string {
	if k.Name == locks.ClientLock {
		return "the program declares no re-entry: add --client-capabilities reentrant if it has it"
	}
	return "the lock is not reentrant"
}

// faultRows are the fault rows: what production does to nodes, networks, clocks and clients.
func faultRows(t traits) []cardRow {
	rows := []cardRow{
		{id: "restart", what: "a node restarted at once, just after a grant, without persistence", shape: func(c *harness.Config) { faulty(c, "restart:at=grant") }},
		{id: "restart-delayed", what: "a node killed just after a grant and kept down 1.5 TTLs before it starts empty", remedies: "restart",
			remedy: "restart a node no sooner than a TTL after it stopped", shape: func(c *harness.Config) { faulty(c, "restart-delayed:at=grant") }},
		{id: "partition-minority", what: "the clients cut from a minority of the nodes (packets dropped)", shape: func(c *harness.Config) {
			faulty(c, "partition:kind=client-minority:mode="+cutMode(t))
		}},
		{id: "partition-majority", what: "the clients cut from a majority of the nodes (from the node, with one)", shape: func(c *harness.Config) {
			faulty(c, "partition:kind=client-majority:mode="+cutMode(t))
		}},
		{id: "partition-holder", what: "the holder's client group cut off while it holds (holds up to four TTLs)", shape: func(c *harness.Config) {
			faulty(c, fmt.Sprintf("partition:kind=%s:group=holder:mode=%s:duration=%v:interval=%v", holderCut(t), cutMode(t), 4*time.Duration(c.TTL), 2*time.Duration(c.TTL)))
			c.ClientGroups, c.HoldMax, c.TimeLimit = 2, 4*c.TTL, harness.Duration(20*time.Second)
		}},
		{id: "node-pause", what: "the holder's nodes paused (SIGSTOP) below, around and past the TTL", shape: func(c *harness.Config) {
			faulty(c, "pause:target="+pauseTarget(t))
		}},
		{id: "client-pause", what: "a client paused (SIGSTOP) past its lease while it holds", shape: func(c *harness.Config) { faulty(c, "client-pause") }},
		// etcd#15247's shape: the stall outlasts a lease and an election; clients that think up to a
		// TTL keep their sessions through it, and holds up to three TTLs span its end.
		{id: "disk-stall", what: "the leader's disk stalled (its fsyncs held) for 2.5 TTLs while the rest of it runs; holds up to three TTLs", shape: func(c *harness.Config) {
			ttl := time.Duration(c.TTL)
			faulty(c, fmt.Sprintf("disk-stall:target=%s:duration=%v:interval=%v", pauseTarget(t), 5*ttl/2, 9*ttl/2))
			c.TimeLimit, c.ThinkMax, c.HoldMax = harness.Duration(max(cardFaultLimit, 20*ttl)), c.TTL, 3*c.TTL
		}},
		{id: "clock-forward", what: "node clocks (a majority) jumped forward past the TTL", shape: func(c *harness.Config) {
			faulty(c, "clock:target=majority:jump=forward")
		}},
		{id: "clock-back", what: "every node clock stepped back past the TTL, set right while it holds no key", shape: func(c *harness.Config) {
			faulty(c, "clock:target=all:jump=back:reset=quiet")
		}},
		{id: "latency", what: "slow links to a majority, with spikes past the node timeout", shape: func(c *harness.Config) {
			faulty(c, "latency:mode=steady+spike:target=majority")
		}},
		{id: "client-crash", what: "a client killed (SIGKILL) while it holds", shape: func(c *harness.Config) {
			faulty(c, "client-crash:point=holding")
			c.Recovery = 3 * c.TTL // the crashed holder's lease must expire and the key be granted again
		}},
	}
	for i := range rows {
		rows[i].group = groupLock
		if rows[i].id == "node-pause" && electsLeader(t.system) {
			rows[i].what = "the leader paused (SIGSTOP) below, around and past the TTL"
		}
		if rows[i].id == "restart" && !strings.HasPrefix(t.system, "redis") {
			rows[i].what = fmt.Sprintf("a node restarted at once, just after a grant (%s keeps its data)", t.system)
		}
		if rows[i].id == "partition-minority" && t.nodes < 3 {
			rows[i].skip = fmt.Sprintf("%d data node(s): no minority to cut", t.nodes)
		}
		if rows[i].id == "partition-minority" && t.system == "redis-sentinel" {
			rows[i].skip = "the clients talk to one primary: no minority to cut"
		}
		if rows[i].id == "disk-stall" && strings.HasPrefix(t.system, "redis") {
			rows[i].skip = "redis-server waits for its disk only with appendfsync always, and then its one thread stops whole, as node-pause stops it"
		}
		if rows[i].id == "disk-stall" && !electsLeader(t.system) {
			rows[i].what = "a node's disk stalled (its fsyncs held) for 2.5 TTLs while the rest of it runs; holds up to three TTLs"
		}
	}
	return append(rows, systemRows(t)...)
}

// electsLeader says whether the system's members elect a leader that orders every write (etcd's
// raft, ZooKeeper's Zab): its lease probe names every member as a holder, so the fault that
// matters falls on the leader, not on a majority chosen at random (which only stops the quorum).
func electsLeader(system string) bool {
	t, err := systems.Lookup(system)
	return err == nil && t.Traits().Leader
}

// holderCut is the partition kind that cuts the holder's group off: from a majority of independent
// nodes (the lease is lost there), from every member of a system with a leader, whose members
// forward to the leader, so that a group cut from a majority still reaches the quorum.
func holderCut(t traits) string {
	if electsLeader(t.system) {
		return "client-all"
	}
	return "client-majority"
}

// pauseTarget is the nodes a node-pause row stops: the holder's majority, or the leader.
func pauseTarget(t traits) string {
	if electsLeader(t.system) {
		return "leader"
	}
	return "holder-majority"
}

// systemRows are the fault rows of one system: Sentinel's failover, a postgres primary's failover
// to its streaming replica, the leader of etcd and ZooKeeper.
func systemRows(t traits) []cardRow {
	var rows []cardRow
	switch {
	case t.system == "redis-sentinel":
		// The first holder must outlive the promotion (about 3.5 s after the kill): TTL 10 s,
		// holds of 6 to 9.5 s.
		rows = append(rows, cardRow{id: "failover", what: "the primary killed after a grant it had not replicated; a replica promoted", shape: func(c *harness.Config) {
			faulty(c, "failover:kind=kill:wait=10s:down=4s:interval=5s")
			c.TTL, c.HoldMax, c.TimeLimit, c.Recovery = harness.Duration(10*time.Second), harness.Duration(9500*time.Millisecond), harness.Duration(40*time.Second), harness.Duration(5*time.Second)
			c.HoldMin = harness.Duration(6 * time.Second)
		}})
	case t.system == "postgres":
		// As pg-advisory-failover and pg-lease-failover: the first holder must outlive the
		// promotion (detect 1 s). With the replica's link stalled, the grant the kill follows is
		// one the replica has not received (asynchronous replication's loss).
		long := func(c *harness.Config) {
			c.TTL, c.HoldMax, c.TimeLimit, c.Recovery = harness.Duration(10*time.Second), harness.Duration(9500*time.Millisecond), harness.Duration(40*time.Second), harness.Duration(21*time.Second)
		}
		rows = append(rows,
			cardRow{id: "failover", what: "the primary killed just after a grant; its streaming replica promoted 1 s later and the clients' links moved to it", shape: func(c *harness.Config) {
				faulty(c, "failover:stall=0:wait=10s:detect=1s:interval=5s")
				long(c)
			}},
			cardRow{id: "failover-lag", what: "the same failover with replication held back on the replica's link before the kill", shape: func(c *harness.Config) {
				faulty(c, "failover:stall=1:wait=10s:detect=1s:interval=5s")
				long(c)
			}})
		if t.replicas == 0 {
			for i := range rows {
				rows[i].skip = "the primary has no streaming replica to promote: run the card with --replicas 1"
			}
		}
	case electsLeader(t.system):
		rows = append(rows,
			cardRow{id: "leader-kill", what: "the leader killed and kept down 5 s, then started with its data", shape: func(c *harness.Config) {
				faulty(c, "restart-delayed:target=leader:delay=5s:interval=8s")
				c.TimeLimit = harness.Duration(20 * time.Second)
			}},
			cardRow{id: "leader-wipe", what: "the leader killed, kept down 4 s, and started without its data", shape: func(c *harness.Config) {
				faulty(c, "restart-delayed:target=leader:wipe=true:delay=4s:interval=8s")
				c.TimeLimit = harness.Duration(20 * time.Second)
			}},
			cardRow{id: "leader-partition", what: "the leader cut from its peers while the clients reach every member", shape: func(c *harness.Config) {
				faulty(c, "partition:target=leader:paths=peers:duration=6s:interval=8s")
				c.TimeLimit = harness.Duration(20 * time.Second)
			}},
			cardRow{id: "leader-latency", what: "the leader's peer links slowed by 300 ms", shape: func(c *harness.Config) {
				faulty(c, "latency:target=leader:paths=peers:delay=300ms:duration=5s:interval=8s")
				c.TimeLimit = harness.Duration(20 * time.Second)
			}})
	}
	for i := range rows {
		rows[i].group = groupLock
	}
	return rows
}

// resourceRows are the counter rows: a resource under the lock while clients pause past their
// lease, unguarded (inherent to leases), then with the guard that fixes it.
func resourceRows(t traits) []cardRow {
	pause := func(guard string) func(c *harness.Config) {
		return func(c *harness.Config) {
			faulty(c, "client-pause")
			c.Workload, c.Guard = "counter", guard
		}
	}
	must := "use fencing tokens (this lock hands none out) or a check-and-set at the resource"
	if t.kind.Tokens {
		must = "guard the resource with the lock's fencing tokens"
	}
	rows := []cardRow{{id: "counter-unguarded", group: groupInherent, what: "a counter written under the lock by clients paused past their lease, unguarded",
		must: must, shape: pause("none")}}
	if t.kind.Tokens {
		rows = append(rows, cardRow{id: "counter-fenced", group: groupRemedy, what: "the same counter, accepting only rising fencing tokens", remedies: "counter-unguarded",
			remedy: "guard the resource with the lock's fencing tokens", shape: pause("fencing")})
	} else {
		rows = append(rows, cardRow{id: "counter-cas", group: groupRemedy, what: "the same counter, written by check-and-set of the value read", remedies: "counter-unguarded",
			remedy: "guard the resource with a check-and-set of the value read", shape: pause("check-and-set")})
	}
	aof := cardRow{id: "restart-aof-always", group: groupRemedy, what: "a node restarted at once after a grant, with appendfsync always", remedies: "restart",
		remedy: "run the nodes with appendfsync always (--persistence aof-always)", shape: func(c *harness.Config) {
			faulty(c, "restart:at=grant")
			c.Persistence = "aof-always"
		}}
	if !strings.HasPrefix(t.system, "redis") {
		aof.skip = t.system + " keeps its data: no persistence to choose"
	}
	return append(rows, aof)
}
