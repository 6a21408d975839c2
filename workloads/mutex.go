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

// Mutex is the mutex workload: processes contend for keys, hold a granted lease for a random time up
// to HoldMax, and release it.
type Mutex struct {
	// Clients is how many processes run at once.
	Clients int
	// Keys is how many lock keys they contend for.
	Keys int
	// TTL is the lease each acquire asks for.
	TTL time.Duration
	// HoldMax bounds the time a process holds a lease: each hold is drawn uniformly from [0, HoldMax].
	// Holds are not cut at the lease's deadline: a HoldMax longer than the validity makes processes
	// work past their deadline, as a client that ignores its lease would, and the checker reports
	// that work as overruns. Default TTL/4, well inside the validity.
	HoldMax time.Duration
	// ThinkMax bounds the pause between a process's operations. Default 20ms.
	ThinkMax time.Duration
	// Seed seeds each process's choices (keys, hold and think times).
	Seed uint64
}

// Env is what a workload needs from the harness.
type Env struct {
	Recorder *history.Recorder
	// NewLocker opens the lock for a process; it is called again with a fresh process id after an
	// indeterminate result, as Jepsen reopens a crashed client.
	NewLocker func(process int) (locks.Locker, error)
}

// KeyName is the lock key with index i.
func KeyName(i int) string { return "lockpick:" + strconv.Itoa(i) }

// Run drives the processes until ctx is done. Each process finishes the operation it is in, and
// releases a lease it holds, before it stops: a run's end never leaves a hold half recorded.
func (m Mutex) Run(ctx context.Context, env Env) error {
	if m.Clients < 1 || m.Keys < 1 || m.TTL <= 0 {
		return fmt.Errorf("mutex workload: clients, keys and ttl must be positive")
	}
	if m.HoldMax <= 0 {
		m.HoldMax = m.TTL / 4
	}
	if m.ThinkMax <= 0 {
		m.ThinkMax = 20 * time.Millisecond
	}
	return runSlots(ctx, env, m.Clients, m.TTL, func(c *client) error { return m.process(ctx, env, c) })
}

// process is one worker slot. Its process id changes after every indeterminate result.
func (m Mutex) process(ctx context.Context, env Env, c *client) error {
	rng := rand.New(rand.NewPCG(m.Seed, uint64(c.pid)+1))
	rec := env.Recorder
	// A random first pause spreads the processes' first connections and requests over the think
	// time, instead of every process dialling every node in the same millisecond.
	sleep(ctx, randDuration(rng, m.ThinkMax))
	for ctx.Err() == nil {
		key := KeyName(rng.IntN(m.Keys))
		lease, err := c.acquire(key)
		if err != nil {
			return err
		}
		if lease == nil {
			sleep(ctx, randDuration(rng, m.ThinkMax))
			continue
		}
		hold := randDuration(rng, m.HoldMax)
		rec.Record(history.Event{Type: history.Invoke, Process: c.pid, F: history.FWork, Key: key, Value: lease.Value})
		time.Sleep(hold)
		rec.Record(history.Event{Type: history.OK, Process: c.pid, F: history.FWork, Key: key, Value: lease.Value})

		if err := c.release(lease, false); err != nil {
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

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
