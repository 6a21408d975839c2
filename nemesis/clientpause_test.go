package nemesis

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestClientPausePlanIsSeeded(t *testing.T) {
	n, err := Build(Spec{Name: "client-pause", Params: map[string]string{"interval": "3s"}}, Env{TTL: 2 * time.Second, Interval: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a := n.Plan(Seed(7, "client-pause"), 30*time.Second)
	b := n.Plan(Seed(7, "client-pause"), 30*time.Second)
	if !reflect.DeepEqual(a, b) || len(a) < 4 {
		t.Fatalf("plans differ or are too short: %v / %v", a, b)
	}
	for i := 0; i < len(a); i += 2 {
		if a[i].F != "pause" || a[i+1].F != "resume" || a[i+1].At-a[i].At != 4*time.Second {
			t.Errorf("op %d: want a pause of 2×TTL then its resume, got %v, %v", i, a[i], a[i+1])
		}
	}
	if _, err := Build(Spec{Name: "client-pause", Params: map[string]string{"length": "1s"}}, Env{TTL: time.Second, Interval: time.Second}); err == nil || !strings.Contains(err.Error(), "duration") {
		t.Errorf("an unknown parameter must name the known ones, got %v", err)
	}
}

// fakePauser stands for the workload: Catch reports process 7 as caught and records the resume.
type fakePauser struct{ resumed chan struct{} }

func (f *fakePauser) Catch(ctx context.Context, pick func(int) int) (int, func(), error) {
	return 7, func() { close(f.resumed) }, nil
}

func TestClientPauseResolveAndHeal(t *testing.T) {
	f := &fakePauser{resumed: make(chan struct{})}
	c := &ClientPause{Clients: f, Interval: time.Second, Duration: 50 * time.Millisecond}
	ctx := context.Background()
	op, err := c.Resolve(ctx, Op{F: "pause"})
	if err != nil || !reflect.DeepEqual(op.Nodes, []string{"p7"}) {
		t.Fatalf("pause resolved to %v, %v", op, err)
	}
	began := time.Now()
	heal, err := c.Resolve(ctx, Op{F: "resume"})
	if err != nil || time.Since(began) < 40*time.Millisecond || !reflect.DeepEqual(heal.Nodes, []string{"p7"}) {
		t.Fatalf("resume resolved to %v, %v after %v", heal, err, time.Since(began))
	}
	if len(c.Healing()) != 1 {
		t.Errorf("a paused process must be healed at the end: %v", c.Healing())
	}
	if err := c.Apply(ctx, heal); err != nil {
		t.Fatal(err)
	}
	<-f.resumed
	if len(c.Healing()) != 0 {
		t.Errorf("nothing left to heal, got %v", c.Healing())
	}
}
