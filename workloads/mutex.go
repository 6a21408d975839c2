// Package workloads drives client processes through a lock and records what they do.
package workloads

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/locks"
)

// Mutex is the mutex workload: processes contend for keys, hold a granted lease for a while, and
// release it. How long they hold it is drawn so that holds reach the lease's deadline (see HoldEdge).
type Mutex struct {
	// Clients is how many processes run at once.
	Clients int
	// Keys is how many lock keys they contend for.
	Keys int
	// TTL is the lease each acquire asks for.
	TTL time.Duration
	// HoldMax, when positive, draws each hold uniformly from [0, HoldMax] (HoldUniform). Holds are
	// not cut at the lease's deadline: a HoldMax longer than the validity makes processes work past
	// their deadline, as a client that ignores its lease would, and the checker reports that work as
	// overruns. Zero draws holds across the lease's own validity (HoldEdge), the default.
	HoldMax time.Duration
	// HoldMin, with HoldMax, is the uniform draw's floor: holds from [HoldMin, HoldMax].
	HoldMin time.Duration
	// ThinkMax bounds the pause between a process's operations. Default 20ms.
	ThinkMax time.Duration
	// Careful makes holders check their remaining validity before working: work that would pass
	// the deadline (less a margin) is shortened to end before it, or skipped.
	Careful bool
	// Extend makes holders renew their lease with Locker.Extend for work longer than it (see
	// holdExtending); their work is drawn across three validities.
	Extend bool
	// Reentrant makes holders of a reentrant lock enter it again inside their hold (nested acquire
	// and release), and makes refused clients now and then unlock a key they do not hold, which the
	// lock must refuse.
	Reentrant bool
	// Groups is the number of client groups (process p is in group p mod Clients mod Groups). With
	// more than one, groups take turns at each key, so a group on a slow link still wins races.
	Groups int
	// Expiry stands in for the validity of leases that promise no deadline (watchdog locks: the
	// watchdog timeout), so their holds too reach and pass the time the lock must renew them by.
	Expiry time.Duration
	// Prefix goes before every key name (a run against servers someone else runs keeps its keys
	// apart from theirs); empty for nodes the run owns.
	Prefix string
	// Seed seeds each process's choices (keys, hold and think times).
	Seed uint64

	turns *turns
	// keys are the key names, made once: a name made per operation was an allocation each.
	keys []string
}

// Env is what a workload needs from the harness.
type Env struct {
	Recorder *history.Recorder
	// NewLocker opens the lock for a process; it is called again with a fresh process id after an
	// indeterminate result, as Jepsen reopens a crashed client.
	NewLocker func(process int) (locks.Locker, error)
	// Faults lets client-side nemeses crash processes and move their clocks; nil when none may.
	Faults *ClientFaults
	// Ready, when set, is called once every process's client is open, before any works; the work
	// begins when it returns (the harness starts the run's clock there).
	Ready func()
}

// KeyPrefix starts every lock key.
const KeyPrefix = "lockpick:"

// KeyName is the lock key with index i.
func KeyName(i int) string { return KeyPrefix + strconv.Itoa(i) }

// keyNames are the names of n keys, each after prefix.
func keyNames(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = prefix + KeyName(i)
	}
	return keys
}

// Run drives the processes until ctx is done. Each process finishes the operation it is in, and
// releases a lease it holds, before it stops: a run's end never leaves a hold half recorded.
func (m Mutex) Run(ctx context.Context, env Env) error {
	if m.Clients < 1 || m.Keys < 1 || m.TTL <= 0 {
		return fmt.Errorf("mutex workload: clients, keys and ttl must be positive")
	}
	if m.HoldMax < 0 || m.Groups < 0 {
		return fmt.Errorf("mutex workload: hold max and groups must not be negative")
	}
	if m.HoldMin < 0 || m.HoldMin > m.HoldMax {
		return fmt.Errorf("mutex workload: hold min %v must be within [0, hold max %v]", m.HoldMin, m.HoldMax)
	}
	if m.ThinkMax <= 0 {
		m.ThinkMax = 20 * time.Millisecond
	}
	m.turns = newTurns(m.Groups, 2*m.TTL)
	m.keys = keyNames(m.Prefix, m.Keys)
	return runSlots(ctx, env, m.Clients, m.TTL, func(ctx context.Context, c *client) error { return m.process(ctx, env, c) })
}

// process is one worker slot. Its process id changes after every indeterminate result.
func (m Mutex) process(ctx context.Context, env Env, c *client) error {
	rng := rand.New(rand.NewPCG(m.Seed, uint64(c.pid)+1))
	// A random first pause spreads the processes' first connections and requests over the think
	// time, instead of every process dialling every node in the same millisecond.
	sleep(ctx, randDuration(rng, m.ThinkMax))
	for ctx.Err() == nil {
		key := m.keys[rng.IntN(m.Keys)]
		group := m.group(c.pid)
		if !m.turns.mayTry(key, group) {
			sleep(ctx, randDuration(rng, m.ThinkMax))
			continue
		}
		lease, err := c.acquire(key)
		if err != nil {
			return err
		}
		if lease == nil {
			if m.Reentrant && rng.IntN(10) == 0 {
				if err := c.foreignUnlock(key); err != nil {
					return err
				}
			}
			sleep(ctx, randDuration(rng, m.ThinkMax))
			continue
		}
		m.turns.won(key, group)
		if c.crashes(CrashHolding) {
			if err := c.die(); err != nil {
				return err
			}
			continue
		}
		lease, retire := m.hold(c, rng, lease)
		if err := c.release(lease, retire); err != nil {
			return err
		}
		sleep(ctx, randDuration(rng, m.ThinkMax))
	}
	return nil
}

// completion maps a lock error to the history type: info when the outcome is unknown, else fail.
func completion(err error) history.Type {
	if locks.IsIndeterminate(err) {
		return history.Info
	}
	return history.Fail
}

func randDuration(rng *rand.Rand, max time.Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	return time.Duration(rng.Int64N(int64(max) + 1))
}

// minPause is the shortest think or work the workload sleeps for. A Go timer fires tens of
// microseconds late on a busy machine and up to a millisecond late on an idle one, so a shorter
// pause would last that long instead; it is not slept at all (at the ceiling, with no think time,
// the sleep was a tenth of each operation).
const minPause = 50 * time.Microsecond

func sleep(ctx context.Context, d time.Duration) {
	if d < minPause {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
