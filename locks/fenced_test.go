package locks

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Tokens increase with every grant, a refused acquire takes none, and a restart without persistence
// resets them: the regression the checker must find.
func TestFencedTokens(t *testing.T) {
	c, eps, _ := cluster(t, 1)
	ctx := context.Background()
	a, b := open(t, "fenced", eps), open(t, "fenced", eps)
	var last int64
	for i := range 3 {
		l, err := a.Acquire(ctx, "k", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if l.Token <= last {
			t.Fatalf("grant %d: token %d not above %d", i, l.Token, last)
		}
		last = l.Token
		if _, err := b.Acquire(ctx, "k", time.Second); !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("second acquire: want ErrNotAcquired, got %v", err)
		}
		if err := a.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if last != 3 {
		t.Errorf("refused acquires took tokens: last token %d, want 3", last)
	}
	if err := c.Kill("n1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	var l *Lease
	var err error
	for range 20 { // the client reconnects after the restart
		if l, err = a.Acquire(ctx, "k", time.Second); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	if l.Token != 1 {
		t.Errorf("after a restart without persistence: token %d, want 1 (the counter was lost)", l.Token)
	}
}
