package locks

import (
	"context"
	"time"
)

// nodeContext bounds one request to a node by the node timeout without a timer of its own, for the
// go-redis clients of this package (ContextTimeoutEnabled): go-redis sets each socket read and write
// deadline from ctx.Deadline(), so the request's I/O ends at the node's deadline as it did under
// context.WithTimeout. What waits on Done instead (a turn in the pool, a dial) waits on the
// operation's context, and is bounded by the client's PoolTimeout and DialTimeout, both the node
// timeout; a pool wait that runs out says so (ErrPoolTimeout, a request never sent) where the
// node's context used to end it first (context.DeadlineExceeded, an unknown outcome).
//
// The operation's bound (workloads' context.WithTimeout) is then the one timer of an operation: at
// the ceiling a timer and a child context per node request cost 4 to 6% of the harness's CPU
// (`go test ./harness -run '^$' -bench Ceiling -benchtime 1x -cpuprofile cpu.prof`). Hand-written:
// the context package has no context with a deadline and no timer.
func nodeContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	return DeadlineOnly(ctx, time.Now().Add(timeout)), func() {}
}

// DeadlineOnly is ctx with deadline, when that is earlier than ctx's own, which only Deadline and Err
// report: no timer, and Done is ctx's. It bounds each request to a node (nodeContext) and each
// operation of a DeadlineBounded lock.
func DeadlineOnly(ctx context.Context, deadline time.Time) context.Context {
	if d, ok := ctx.Deadline(); ok && !deadline.Before(d) {
		return ctx // ctx ends first: its deadline is the one
	}
	return deadlineContext{Context: ctx, deadline: deadline}
}

// deadlineContext is its parent with an earlier deadline that only Deadline and Err report.
type deadlineContext struct {
	context.Context
	deadline time.Time
}

func (c deadlineContext) Deadline() (time.Time, bool) { return c.deadline, true }

func (c deadlineContext) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// Bound is a DeadlineOnly context set again for each operation by one owner, for paths where
// nothing keeps an operation's context past its return and operations never overlap: a process's
// operations on a DeadlineBounded lock (the workload), and single's requests (a Locker belongs to
// one process). DeadlineOnly allocates its context; at the ceiling that was two allocations of
// every operation's few in the harness's own code.
type Bound struct{ deadlineContext }

// Set makes b ctx with deadline, as DeadlineOnly(ctx, deadline) is, and returns it; ctx itself
// when its own deadline comes first. The context Set returned before is b too: it must be done with.
func (b *Bound) Set(ctx context.Context, deadline time.Time) context.Context {
	if d, ok := ctx.Deadline(); ok && !deadline.Before(d) {
		return ctx
	}
	b.Context, b.deadline = ctx, deadline
	return b
}
