package nemesis

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeHolders is a HolderView a test steers: who holds now, and a grant to make after a delay.
type fakeHolders struct {
	mu   sync.Mutex
	held []Holder
}

func (f *fakeHolders) Holders() []Holder {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Holder(nil), f.held...)
}

func (f *fakeHolders) set(hs ...Holder) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held = hs
}

// grantLater adds a holder granted after d.
func (f *fakeHolders) grantLater(d time.Duration, h Holder) {
	time.AfterFunc(d, func() {
		h.Since = time.Now()
		f.mu.Lock()
		defer f.mu.Unlock()
		f.held = append(f.held, h)
	})
}

// A group=holder fault cuts the group of the process granted a lock while it waited, before an
// older holder; without a new grant, the newest holder's; with nobody holding, it is skipped (and
// so is its heal). Its heal takes exactly the paths its cut took, once the cut lasted its duration.
func TestPartitionHolderGroup(t *testing.T) {
	env := netEnv(fiveNodes, []string{"c1", "c2", "c3"})
	view := &fakeHolders{}
	env.Holders = view
	n := build(t, "partition:group=holder:wait=300ms:duration=200ms", env).(*Partition)
	if !reflect.DeepEqual(n.Kinds, []string{PartClientMajority}) {
		t.Fatalf("group=holder without a kind cuts %v, want the holder's group from a majority", n.Kinds)
	}
	plan := n.Plan(Seed(1, "partition"), time.Minute)
	checkTimedPlan(t, plan, time.Minute)
	ctx := context.Background()
	cutOf := func(op Op) Cuts {
		t.Helper()
		verb, cuts, err := splitVerb(op.F)
		if err != nil || verb == "" {
			t.Fatalf("op %q: %v", op.F, err)
		}
		return cuts
	}
	resolve := func(op Op) Op {
		t.Helper()
		r, err := n.Resolve(ctx, op)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	old := time.Now().Add(-time.Second)
	view.set(Holder{Process: 0, Group: "c1", Key: "k", Since: old}, Holder{Process: 4, Group: "c2", Key: "k", Since: old.Add(time.Millisecond)})
	view.grantLater(50*time.Millisecond, Holder{Process: 2, Group: "c3", Key: "k"})
	cut := resolve(plan[0])
	cutAt := time.Now()
	cuts := cutOf(cut)
	if len(cuts) != 1 || len(cuts["c3"]) != 3 {
		t.Fatalf("cut %q: want c3 (granted while the fault waited) cut from a majority", cut.F)
	}
	heal := resolve(plan[1])
	if lasted := time.Since(cutAt); lasted < 200*time.Millisecond {
		t.Fatalf("the cut, begun late, healed after %v: want its whole duration of 200ms", lasted)
	}
	if !reflect.DeepEqual(cutOf(heal), cuts) || !strings.HasPrefix(heal.F, "heal ") {
		t.Fatalf("heal %q does not undo cut %q", heal.F, cut.F)
	}

	// No grant while it waits: the newest holder now.
	cuts = cutOf(resolve(plan[2]))
	if len(cuts) != 1 || cuts["c3"] == nil {
		t.Fatalf("cuts %v: want the newest holder's group c3", cuts)
	}
	resolve(plan[3])

	view.set()
	start := time.Now()
	if skipped := resolve(plan[4]); len(skipped.Nodes) != 0 {
		t.Fatalf("nobody holds, yet the fault cut %q", skipped.F)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("gave up after %v, want the wait of 300ms", waited)
	}
	if heal := resolve(plan[5]); len(heal.Nodes) != 0 {
		t.Fatalf("a skipped cut's heal did %q", heal.F)
	}
}

func TestPartitionHolderGroupRefusals(t *testing.T) {
	env := netEnv(fiveNodes, []string{"c1", "c2"})
	for spec, want := range map[string]string{
		"partition:group=holder:kind=isolate":                  "group=holder needs kind=client-majority",
		"partition:group=holder:kind=client-majority+bridge":   "kind=bridge cuts no one group",
		"partition:group=holder:paths=peers":                   "paths=peers",
		"partition:wait=1s":                                    "wait= applies only to group=holder",
		"partition:group=c3":                                   "group=c3 is not allowed",
		"partition:group=holder:kind=client-minority:wait=bad": "wait=bad is not a duration",
	} {
		s, err := ParseSpec(spec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Build(s, env); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", spec, err, want)
		}
	}
	// Without the run's view of holders (a configuration checked before the run) it builds, and
	// says what it lacks when a fault starts.
	n := build(t, "partition:group=holder", env).(*Partition)
	plan := n.Plan(Seed(1, "partition"), time.Minute)
	if _, err := n.Resolve(context.Background(), plan[0]); err == nil || !strings.Contains(err.Error(), "who holds") {
		t.Fatalf("resolved without a holder view: %v", err)
	}
}
