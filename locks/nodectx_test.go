package locks

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"
)

func TestNodeContextTakesTheEarlierDeadline(t *testing.T) {
	op, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	ctx, _ := nodeContext(op, 50*time.Millisecond)
	d, ok := ctx.Deadline()
	if !ok || time.Until(d) > 50*time.Millisecond {
		t.Fatalf("node deadline %v (%v), want within 50ms", d, ok)
	}
	if ctx.Err() != nil {
		t.Fatalf("Err before the deadline: %v", ctx.Err())
	}
	time.Sleep(time.Until(d))
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err after the deadline: %v", ctx.Err())
	}
	short, cancel2 := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel2()
	if ctx, _ := nodeContext(short, time.Hour); ctx != short {
		t.Fatal("an operation that ends before the node timeout should bound the request itself")
	}
	cancel()
	if ctx, _ := nodeContext(op, time.Hour); !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("a cancelled operation's request: Err %v", ctx.Err())
	}
}

// The node timeout still ends a request to a node that never answers, well before the operation's
// own bound: the socket deadline comes from the node context's deadline. So it does under an
// operation bounded by a deadline alone (DeadlineOnly: no Done ever closes), as the workload bounds
// a DeadlineBounded lock's operations.
func TestNodeTimeoutBoundsARequestToAStoppedNode(t *testing.T) {
	for _, tc := range []struct {
		name, lock   string
		deadlineOnly bool
	}{{"single", "single", false}, {"redlock", "redlock", false}, {"single-deadline-only", "single", true}} {
		t.Run(tc.name, func(t *testing.T) {
			name, deadlineOnly := tc.lock, tc.deadlineOnly
			c, eps, _ := cluster(t, 1)
			l := openWith(t, name, eps, Options{NodeTimeout: 100 * time.Millisecond})
			if err := c.Signal("n1", syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			defer c.Signal("n1", syscall.SIGCONT)
			// The operation's bound is far from the node timeout, so even a loaded machine's slow
			// return tells which of the two ended the request.
			op, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if deadlineOnly {
				if _, ok := l.(DeadlineBounded); !ok {
					t.Fatalf("%s is not DeadlineBounded", name)
				}
				op = DeadlineOnly(context.Background(), time.Now().Add(time.Minute))
			}
			began := time.Now()
			_, err := l.Acquire(op, "k", 5*time.Second)
			took := time.Since(began)
			if err == nil {
				t.Fatal("a stopped node granted the lock")
			}
			if took < 90*time.Millisecond || took > 20*time.Second {
				t.Fatalf("the request ended after %v, want the node timeout (100ms): %v", took, err)
			}
		})
	}
}
