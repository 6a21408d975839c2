package systems

import "time"

// Traits are what a topology's servers allow, whatever runs them, and what a run's configuration
// and its --dry-run must know of the family without naming it.
type Traits struct {
	// Peers: the servers talk to each other (replication, sentinels, raft), over paths a fault
	// can cut or slow.
	Peers bool
	// WriteHolds: a node can hold its clients' writes back (redis's CLIENT PAUSE WRITE).
	WriteHolds bool
	// LockSized: the lock decides how many nodes there are (independent masters), within the
	// family's bounds; otherwise the family's own sizes (Size) do.
	LockSized bool
	// Discovers: someone else's servers are found through watchers (sentinels) that report the
	// nodes for a monitored name (--master-name), so the endpoints are not the nodes.
	Discovers bool
	// Sessions: a server can end a client's session (PostgreSQL's pg_terminate_backend), and the
	// System is a SessionEnder.
	Sessions bool
	// Leader: the members elect a leader that orders every write (etcd's raft, ZooKeeper's Zab), so
	// a lease lives on every member and the faults that matter fall on the leader.
	Leader bool
	// SessionTTL: a lock's TTL on this family is its client session's timeout (ZooKeeper), sent in
	// milliseconds, and this is the shortest a card runs: a client reads each reply within about
	// two thirds of the session, so a shorter one ends whenever a loaded machine stalls a JVM.
	SessionTTL time.Duration
	// Server is the option that names the servers' program (redis-server or etcd-server).
	Server string
	// WholeSecondLeases and LeaseGrace: a server-side lease lasts whole seconds, and a new leader
	// grants every lease LeaseGrace more (etcd), so a dead holder's lease outlives it by that much.
	WholeSecondLeases bool
	LeaseGrace        time.Duration
	// DiskIdle says why the family's servers, as lockpick runs them, never wait for their disk (so
	// the disk-stall fault would hold nothing); empty when they do. DiskWaitsWith, when set, is the
	// one persistence under which they do (redis-server: appendfsync always).
	DiskIdle      string
	DiskWaitsWith Persistence
	// NotOn names the backends the family's nodes cannot run on, each with why and the fix in one
	// line: the family says it, so that the backend's checks name no family.
	NotOn map[string]string
	// Keys says which keys the lock's requests touch; Cleanup what a run on someone else's servers
	// deletes at its end (with %s for the run's key prefix): --dry-run's prose.
	Keys, Cleanup string
}

// Size is the size a run asks of a family: zero takes the family's default. Lock names the run's
// lock, for errors.
type Size struct {
	Nodes, Replicas, Sentinels int
	External                   bool
	Lock                       string
}

// Expiry is the longest a server-side lease of ttl outlives a holder that died.
func (t Traits) Expiry(ttl time.Duration) time.Duration {
	if t.WholeSecondLeases {
		ttl = (ttl + time.Second - 1).Truncate(time.Second)
	}
	return ttl + t.LeaseGrace
}

// redisKeys and redisCleanup are the Redis families' --dry-run prose.
const (
	redisKeys    = "the lock's commands (SET NX PX, compare-and-delete and extend scripts, GET, the lease probe's reads) touch only these keys and keys named after them (a fencing token's counter lockpick:token:KEY)"
	redisCleanup = "on every endpoint (with sentinels, on the primary they name then), SCAN MATCH *%s* and UNLINK what it finds; lockpick never sends FLUSHALL, FLUSHDB, CONFIG, CLIENT PAUSE, SHUTDOWN, DEBUG or a SENTINEL command that changes anything, and never kills, pauses or restarts a server"
)
