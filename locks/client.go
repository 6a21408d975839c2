package locks

import "time"

// Interfaces a Locker may offer beyond Locker. The workload and the client-side nemeses look for
// them with a type assertion; a lock that lacks one cannot take the matching fault, and the nemesis
// says so at configuration time rather than doing nothing.

// LeaseEvent is something a lock learned about a lease by itself, outside any request: a watchdog
// or keepalive renewed it (Lost false, Deadline the new end of its validity, zero when the lock
// promises none), or the lock learned that it is gone (Lost true).
type LeaseEvent struct {
	Key, Value string
	Lost       bool
	Deadline   time.Time
}

// Notifier is a Locker with background renewals (a watchdog, a keepalive, an external client's
// unsolicited events). The workload calls Notify once, before the first operation; the Locker calls
// f for every event, from any goroutine, until Close returns. The workload records each event as a
// history.FRenewed or history.FLost event of the process.
type Notifier interface {
	Notify(f func(LeaseEvent))
}

// Pausable is a client that can be stopped as a whole, background renewals included, as SIGSTOP
// stops a process: nothing it would send leaves it until Resume.
type Pausable interface {
	Pause() error
	Resume() error
}

// Crashable is a client that can die as a killed process does: no release, no cleanup, its
// background renewals stop for good, and any request in flight is abandoned. After Crash the
// workload retires the process id.
type Crashable interface {
	Crash() error
}

// ClockShifter is a client whose own wall clock can be moved: locks that trust the client's clock
// (SETNX/GETSET timestamps, PXAT expiries) read it through Options.Clock or, for a client program,
// through the clock shim. ShiftClock sets the offset from the real time (not a further step).
type ClockShifter interface {
	ShiftClock(offset time.Duration) error
}

// DeadlineBounded is a Locker whose operations end by their context's deadline and never wait on its
// Done: each request carries the deadline to its socket (go-redis's ContextTimeoutEnabled, through
// nodeContext), and every other wait in them (a turn in the pool, a dial) is bounded by the node
// timeout, which is below the TTL. The workload bounds such a lock's operations by a deadline alone
// (DeadlineOnly), without the timer, context and channel of context.WithTimeout: at the ceiling they
// were about 5% of the harness's CPU; and it sets one context again for each operation (Bound), so
// such a lock must keep no operation's context once the operation has returned. A type that embeds
// such a lock and waits on Done in a method of its own, or keeps a context, must not pass for one.
type DeadlineBounded interface {
	Locker
	DeadlineBounded()
}

// Breakable is a client that can break for good: a client program that broke the protocol or died
// unasked. Broken says why, or nil. The workload ends the run when a process it retires is broken:
// the history must not go on with guesses about what the program did.
type Breakable interface {
	Broken() error
}

// CrashPoint names a place inside a lock's acquire where a client-crash nemesis may kill the client
// (between SETNX and EXPIRE, say). A lock that has such points calls Options.Crash(point) there; a
// non-nil error means the client died at that point: the lock returns that error at once, with no
// cleanup, and the workload records the operation as info and retires the process.
type CrashPoint = string
