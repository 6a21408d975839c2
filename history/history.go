// Package history defines the events a run records and streams them to and from disk.
//
// A history is the only thing the checker reads, so everything a verdict depends on is here:
// every operation of every process and of the nemesis, stamped with the harness's monotonic clock.
package history

// Type is the kind of an event, as in Jepsen: an operation is invoked and then completes ok, fails
// (it certainly did not take effect) or ends with info (its effect is unknown).
type Type string

// The event types.
const (
	Invoke Type = "invoke"
	OK     Type = "ok"
	Fail   Type = "fail"
	Info   Type = "info"
)

// Operation names of client processes.
const (
	// FAcquire asks the lock for a lease; an ok completion carries Value, Token, Deadline, Validity.
	FAcquire = "acquire"
	// FRelease gives a lease back; its invoke time ends the hold. A fail completion carries
	// ReasonLost when the lock answered that the lease was no longer held.
	FRelease = "release"
	// FExtend renews a lease: the invoke names the lease (Key, Value); an ok completion carries the
	// renewed lease's Deadline and Validity, which then end the hold; a fail completion carries
	// ReasonLost (the lock answered that the lease was no longer held) or ReasonError.
	FExtend = "extend"
	// FWork is the protected work done under a lease: invoke when it starts, ok when it ends. Work that
	// ends after the lease's deadline is an overrun.
	FWork = "work"
	// FRead reads the protected resource (counter workload): the ok completion's Value is what it read.
	FRead = "read"
	// FWrite writes the protected resource: Value is the value written and Token the lease's fencing
	// token. ok means the resource accepted it, fail that its guard rejected it (a definite
	// non-effect), info that the outcome is unknown.
	FWrite = "write"
	// FFinal is the harness's read of the resource after the run: Value is the final value of Key.
	FFinal = "final"
	// FRun is the run itself, an operation of the harness process: its invoke is the first event of
	// every history the harness writes and carries the Plan; its completion is the last event, ok
	// when the whole plan ran, info (with Error saying why) when the run was cut short. A history
	// whose run never completed was killed: the checker judges how much of the plan it covers.
	FRun = "run"
	// FRenewed is a renewal the lock made by itself (a watchdog, a keepalive): an info event of a
	// client process with no invoke before it, naming the lease (Key, Value) and, when the lock
	// promises one, the renewed lease's Deadline, which then ends the hold if it came while the
	// lease's promise lasted. It is judged as an ok extend is: one at or after the end of the
	// promise (the deadline, or a lost event) revives nothing and is a late renewal.
	FRenewed = "renewed"
	// FLost is the lock telling its holder, by itself, that the lease is gone (a session ended): an
	// info event of a client process with no invoke, naming the lease. The hold ends there; before
	// the deadline the lock promised it is an early lease loss.
	FLost = "lost"
)

// Reasons a definite acquire failure (type fail) gives, so availability can tell contention from
// errors.
const (
	// ReasonHeld: another client holds the lock; the lock worked as designed.
	ReasonHeld = "held"
	// ReasonError: the lock could not be reached or reach its quorum (refused connection, no
	// majority); the request certainly had no effect.
	ReasonError = "error"
	// ReasonLost: a release or extend was refused because the lease was no longer held. Completed
	// before the deadline the lock promised, it proves the lock dropped a lease early.
	ReasonLost = "lost"
	// ReasonNotOwner: a release refused because the process does not own the lock.
	ReasonNotOwner = "not-owner"
)

// Plan is what a run set out to do, recorded on the run's invoke so that the history alone tells
// the checker how much evidence the run should have produced. Durations are nanoseconds.
type Plan struct {
	Lock     string   `json:"lock"`
	Workload string   `json:"workload"`
	Keys     []string `json:"keys"`
	Clients  int      `json:"clients"`
	TTL      int64    `json:"ttl"`
	// TimeLimit is the fault phase; Recovery the fault-free phase after the final heal.
	TimeLimit int64 `json:"time_limit"`
	Recovery  int64 `json:"recovery"`
	// Nemeses are the nemesis specs of the run (name:param=value...), empty for none.
	Nemeses []string `json:"nemeses,omitempty"`
	Seed    uint64   `json:"seed"`
	// Hold is how the mutex workload drew hold times: "edge" (across the whole validity, a few past
	// it) or "uniform" (uniform from HoldMin, usually 0, up to HoldMax); empty for other workloads
	// and older histories.
	Hold    string `json:"hold,omitempty"`
	HoldMax int64  `json:"hold_max,omitempty"`
	HoldMin int64  `json:"hold_min,omitempty"`
	// Careful: holders checked their remaining validity before working and cut work that would
	// have passed the deadline. Extend: holders renewed their lease for long work.
	Careful bool `json:"careful,omitempty"`
	Extend  bool `json:"extend,omitempty"`
	// Expiry is the longest a lease outlives a holder that died (the TTL, or a watchdog lock's
	// timeout): after the last heal every key must be granted again within it plus a margin.
	Expiry int64 `json:"expiry,omitempty"`
	// Scenario is the scenario file the run's options came from, empty for a command line: advice
	// then names the file's fields (recovery: 20s) rather than flags.
	Scenario string `json:"scenario,omitempty"`
}

// Nemesis effects: whether a nemesis operation begins a fault or heals one.
const (
	EffectFault = "fault"
	EffectHeal  = "heal"
)

// FResetForward is the heal of a node clock that was behind, stepped back to the real time. It
// moves the clock forward as a jump does, so every key set while the clock was behind expires that
// much early; the checker counts it among the faults that can make a node forget a key.
const FResetForward = "reset-forward"

// NemesisProcess is the process id of the nemesis; client processes are numbered from 0.
const NemesisProcess = -1

// SystemProcess is the process id of what the system under test announces by itself: a role change
// (the sentinels promoting a replica) is one info event with F = FRole, Nodes the nodes whose role
// changed, Roles their new roles, Note what the system announced, and no invoke before it.
const SystemProcess = -3

// FRole is a role change the system announced (see SystemProcess).
const FRole = "role"

// HarnessProcess is the process id of the harness's own operations (the final read of the resource).
const HarnessProcess = -2

// Event is one line of history.jsonl.
//
// Times are nanoseconds since the run started, from the harness's monotonic clock. Deadline is on the
// same clock: the instant the lease the lock promised ends.
type Event struct {
	Index   int64  `json:"index"`
	Time    int64  `json:"time"`
	Type    Type   `json:"type"`
	Process int    `json:"process"`
	F       string `json:"f"`
	Key     string `json:"key,omitempty"`

	// Lease of an ok acquire (and the lease a release or work refers to).
	Value    string `json:"value,omitempty"`
	Token    int64  `json:"token,omitempty"`
	Deadline int64  `json:"deadline,omitempty"`
	Validity int64  `json:"validity,omitempty"`
	// Depth is a reentrant lock's count: after an ok acquire (1 = the outermost level, or a fresh
	// grant), and on a release invoke the level it leaves (its completion may carry the count after
	// it). It is on nothing else, and the checker refuses depths that do not add up.
	Depth int `json:"depth,omitempty"`

	// Nodes are the nodes a nemesis operation targets, or the nodes that granted a lease.
	Nodes []string `json:"nodes,omitempty"`
	// Roles are, on a nemesis event, the role each node in Nodes had when the event was recorded
	// ("primary", "replica", "sentinel"), in systems whose roles can change; on a role event
	// (F = FRole), the new role of each node in Nodes.
	Roles map[string]string `json:"roles,omitempty"`
	// Fault names the nemesis a nemesis event belongs to (restart, restart-delayed, ...).
	Fault string `json:"fault,omitempty"`
	// Effect is EffectFault or EffectHeal on nemesis events.
	Effect string `json:"effect,omitempty"`

	// Offsets are the wall-clock offsets of nodes, in nanoseconds, on clock nemesis events: on the
	// invoke, the offset each target is being set to; on the completion, the offset measured on each
	// node afterwards (Redis TIME against the harness clock).
	Offsets map[string]int64 `json:"offsets,omitempty"`
	// Guard is the resource's guard on write events of the counter workload (none, fencing,
	// check-and-set): the checker's model of the resource depends on it.
	Guard string `json:"guard,omitempty"`

	// Reason classifies a failed acquire (ReasonHeld or ReasonError) or a failed release or extend
	// (ReasonLost or ReasonError).
	Reason string `json:"reason,omitempty"`
	// Plan is set on the run's invoke (F = FRun) only.
	Plan *Plan `json:"plan,omitempty"`
	// Note is what the system announced, on a role event (F = FRole); on a nemesis event, how the
	// nemesis applied its fault (the failover's stall: the primary's client writes held from the look
	// that found no lease until the stall was in place).
	Note string `json:"note,omitempty"`
	// Stderr is the end of a client program's stderr, on the completion of a FaultClientExit event:
	// what the program said as it died (a traceback, a panic).
	Stderr string `json:"stderr,omitempty"`

	Error string `json:"error,omitempty"`
}

// IsNemesis reports whether the event belongs to the nemesis.
func (e Event) IsNemesis() bool { return e.Process == NemesisProcess }

// IsCompletion reports whether the event completes an operation.
func (e Event) IsCompletion() bool { return e.Type != Invoke }
