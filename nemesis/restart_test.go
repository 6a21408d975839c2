package nemesis

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/clusters"
	"github.com/lockpick-dev/lockpick/history"
)

var fiveNodes = []string{"n1", "n2", "n3", "n4", "n5"}

func TestPlanIsReproducibleFromTheSeed(t *testing.T) {
	for _, delay := range []time.Duration{0, 3 * time.Second} {
		r := &Restart{Nodes: fiveNodes, Interval: 2 * time.Second, Delay: delay}
		a := r.Plan(Seed(7, r.Name()), time.Minute)
		b := r.Plan(Seed(7, r.Name()), time.Minute)
		c := r.Plan(Seed(8, r.Name()), time.Minute)
		if len(a) == 0 {
			t.Fatal("empty plan")
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatal("the same seed gave two plans")
		}
		if reflect.DeepEqual(a, c) {
			t.Fatal("two seeds gave the same plan")
		}
	}
}

// Replays a plan and checks what the restart nemesis promises: ordered, inside the time limit,
// one fault at a time, majorities and single nodes both drawn, and each delayed node down long enough.
func TestRestartPlanInvariants(t *testing.T) {
	for _, delay := range []time.Duration{0, 3 * time.Second} {
		r := &Restart{Nodes: fiveNodes, Interval: 2 * time.Second, Delay: delay}
		limit := 2 * time.Minute
		plan := r.Plan(Seed(1, r.Name()), limit)
		down := map[string]time.Duration{}
		var majority, single, faults int
		var inFault []string
		for i, op := range plan {
			if i > 0 && op.At < plan[i-1].At {
				t.Fatalf("op %d out of order", i)
			}
			if op.At >= limit {
				t.Fatalf("op %d at %v is past the time limit", i, op.At)
			}
			switch op.F {
			case "kill":
				if len(down) == 0 {
					// A new fault begins; the previous one has fully healed.
					if len(inFault) > 0 {
						faults++
						if len(inFault) == 3 {
							majority++
						} else if len(inFault) == 1 {
							single++
						} else {
							t.Fatalf("fault with %d nodes", len(inFault))
						}
					}
					inFault = nil
				}
				n := op.Nodes[0]
				if _, ok := down[n]; ok {
					t.Fatalf("%s killed twice", n)
				}
				down[n] = op.At
				inFault = append(inFault, n)
			case "start":
				for _, n := range op.Nodes {
					at, ok := down[n]
					if !ok {
						t.Fatalf("%s started while up", n)
					}
					if op.At-at < delay {
						t.Fatalf("%s down %v, less than the delay %v", n, op.At-at, delay)
					}
					delete(down, n)
				}
			}
		}
		if len(down) != 0 {
			t.Fatalf("plan ends with nodes down: %v", down)
		}
		if majority == 0 || single == 0 {
			t.Fatalf("delay %v: %d majority and %d single-node faults; want both", delay, majority, single)
		}
	}
}

// Runs a short plan against real nodes and checks the history and the final heal.
func TestRunRecordsAndHeals(t *testing.T) {
	c, err := clusters.StartLocal(context.Background(), clusters.Config{Nodes: 3, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	path := filepath.Join(t.TempDir(), history.FileName)
	rec, err := history.Create(path, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &Restart{Cluster: c, Nodes: []string{"n1", "n2", "n3"}, Interval: time.Second, Delay: 300 * time.Millisecond}
	plan := []Op{
		{At: 50 * time.Millisecond, F: "kill", Nodes: []string{"n1"}, Effect: history.EffectFault},
		{At: 60 * time.Millisecond, F: "kill", Nodes: []string{"n2"}, Effect: history.EffectFault},
		{At: 10 * time.Second, F: "start", Nodes: []string{"n1"}, Effect: history.EffectHeal},
	}
	// The run is cut off at 200ms; the heal must still wait out n1's and n2's delay.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	if err := Run(ctx, r, plan, rec); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < 350*time.Millisecond {
		t.Fatalf("heal took %v: it did not keep the nodes down for the delay", took)
	}
	rec.Close()
	for _, n := range []string{"n1", "n2", "n3"} {
		if !c.Running(n) {
			t.Fatalf("%s still down after Run", n)
		}
	}
	evs, err := history.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		if !e.IsNemesis() || e.Fault != "restart-delayed" {
			t.Fatalf("unexpected event %+v", e)
		}
		got = append(got, string(e.Type)+" "+e.F+" "+e.Effect+" "+strings.Join(e.Nodes, ","))
	}
	want := []string{
		"invoke kill fault n1", "info kill fault n1",
		"invoke kill fault n2", "info kill fault n2",
		"invoke start heal n1,n2", "info start heal n1,n2",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("history\n got %q\nwant %q", got, want)
	}
}
