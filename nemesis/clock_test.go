package nemesis

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/history"
)

func clockEnv() Env {
	return Env{Nodes: fiveNodes, TTL: 2 * time.Second, Interval: 3 * time.Second, NodeTimeout: 100 * time.Millisecond, Keys: []string{"k0"}}
}

func buildClockSpec(t *testing.T, text string) *Clock {
	t.Helper()
	spec, err := ParseSpec(text)
	if err != nil {
		t.Fatal(err)
	}
	n, err := Build(spec, clockEnv())
	if err != nil {
		t.Fatal(err)
	}
	return n.(*Clock)
}

func TestClockDefaults(t *testing.T) {
	c := buildClockSpec(t, "clock")
	if c.Target != TargetOne || !reflect.DeepEqual(c.Jumps, []string{JumpForward, JumpBack}) ||
		c.Offset != 4*time.Second || c.Duration != 2*time.Second || c.Interval != 3*time.Second ||
		c.Period != 10*time.Millisecond || c.Reset != ResetStep {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestClockPlanIsReproducibleFromTheSeed(t *testing.T) {
	c := buildClockSpec(t, "clock:jump=forward+back+strobe:target=minority")
	a := c.Plan(Seed(3, "clock"), time.Minute)
	b := c.Plan(Seed(3, "clock"), time.Minute)
	d := c.Plan(Seed(4, "clock"), time.Minute)
	if len(a) == 0 {
		t.Fatal("empty plan")
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave two plans")
	}
	if reflect.DeepEqual(a, d) {
		t.Fatal("two seeds gave the same plan")
	}
}

// Every fault is followed by its reset, on the same nodes, Duration later, before the next fault
// and inside the time limit; every jump kind is drawn.
func TestClockPlanInvariants(t *testing.T) {
	for _, spec := range []string{
		"clock:jump=forward+back+strobe:target=minority",
		"clock:target=holder-one",
		"clock:jump=back:reset=slew:offset=50ms:slew-rate=0.01",
	} {
		c := buildClockSpec(t, spec)
		limit := 2 * time.Minute
		plan := c.Plan(Seed(1, "clock"), limit)
		if len(plan)%2 != 0 || len(plan) < 8 {
			t.Fatalf("%s: %d ops", spec, len(plan))
		}
		kinds := map[string]bool{}
		for i := 0; i < len(plan); i += 2 {
			f, r := plan[i], plan[i+1]
			kinds[f.F] = true
			if f.Effect != history.EffectFault || r.F != FReset || r.Effect != history.EffectHeal {
				t.Fatalf("%s: ops %d, %d are %v, %v", spec, i, i+1, f, r)
			}
			if !reflect.DeepEqual(f.Nodes, r.Nodes) {
				t.Fatalf("%s: reset %v does not match fault %v", spec, r.Nodes, f.Nodes)
			}
			if IsLockAware(c.Target) != (len(f.Nodes) == 0) {
				t.Fatalf("%s: fault nodes %v", spec, f.Nodes)
			}
			if r.At-f.At < c.Duration {
				t.Fatalf("%s: fault %d lasts %v, less than %v", spec, i, r.At-f.At, c.Duration)
			}
			end := r.At + c.healTime(strings.TrimPrefix(f.F, "bump-"))
			if end >= limit {
				t.Fatalf("%s: reset %d ends at %v, past the limit", spec, i, end)
			}
			if i+2 < len(plan) && plan[i+2].At <= end {
				t.Fatalf("%s: fault %d starts before the reset before it ended", spec, i+2)
			}
		}
		if spec == "clock:jump=forward+back+strobe:target=minority" && len(kinds) != 3 {
			t.Fatalf("%s: drew only %v", spec, kinds)
		}
	}
}

func TestClockParamErrors(t *testing.T) {
	for spec, want := range map[string]string{
		"clock:target=some":              "target=some is not allowed: use one of one, minority, majority, all, holder, holder-one, holder-majority",
		"clock:jump=sideways":            `"sideways" is not allowed: use one or more of forward, back, strobe, fast`,
		"clock:offset=4":                 "offset=4 is not a duration",
		"clock:offset=0s":                "offset must be positive",
		"clock:reset=ntp":                "reset=ntp is not allowed: use one of step, slew",
		"clock:reset=slew:slew-rate=0":   "slew-rate must be above 0",
		"clock:skew=1s":                  `unknown parameter "skew"`,
		"clock:period=0s":                "period must be positive",
		"clock:duration=-1s":             "duration=-1s is not a duration",
		"clock:interval=0s":              "interval must be positive",
		"clock:slew-rate=2":              "slew-rate=2 is not a share",
		"clock:target=holder:wait=never": "wait=never is not a duration",
	} {
		s, err := ParseSpec(spec)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Build(s, clockEnv())
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", spec, err, want)
		}
	}
}

// fakeClocks records offsets without a cluster; the shim itself is tested in clusters.
type fakeClocks struct{ off map[string]time.Duration }

func (f *fakeClocks) SetClockOffset(n string, d time.Duration) error {
	if f.off == nil {
		f.off = map[string]time.Duration{}
	}
	f.off[n] = d
	return nil
}
func (f *fakeClocks) ClockOffset(n string) (time.Duration, error) {
	d, ok := f.off[n]
	if !ok {
		return 0, fmt.Errorf("no node %s", n)
	}
	return d + time.Millisecond, nil
}

func TestClockApplyResetsAndHeals(t *testing.T) {
	c := buildClockSpec(t, "clock:jump=back:reset=slew:offset=20ms:slew-rate=1")
	fc := &fakeClocks{}
	c.Clocks = fc
	ctx := context.Background()
	op := Op{F: FBumpBack, Nodes: []string{"n2", "n4"}, Effect: history.EffectFault}
	ev := history.Event{Type: history.Invoke}
	c.Annotate(ctx, op, &ev, nil)
	if err := c.Apply(ctx, op); err != nil {
		t.Fatal(err)
	}
	if ev.Offsets["n2"] != int64(-20*time.Millisecond) || fc.off["n4"] != -20*time.Millisecond {
		t.Fatalf("invoke offsets %v, set %v", ev.Offsets, fc.off)
	}
	ev.Type = history.Info
	c.Annotate(ctx, op, &ev, nil)
	if ev.Offsets["n4"] != int64(-19*time.Millisecond) {
		t.Fatalf("measured offsets %v", ev.Offsets)
	}
	if h := c.Healing(); len(h) != 1 || !reflect.DeepEqual(h[0].Nodes, []string{"n2", "n4"}) {
		t.Fatalf("healing %v", h)
	}
	// A reset planned for every node resolves to the nodes shifted.
	r, err := c.Resolve(ctx, Op{F: FReset, Effect: history.EffectHeal})
	if err != nil || !reflect.DeepEqual(r.Nodes, []string{"n2", "n4"}) {
		t.Fatalf("resolved reset %v, %v", r, err)
	}
	start := time.Now()
	if err := c.Apply(ctx, r); err != nil {
		t.Fatal(err)
	}
	// Slewing at rate 1 catches up 20 ms in 20 ms: the clock ran at twice the real speed.
	if took := time.Since(start); took < 20*time.Millisecond {
		t.Fatalf("slew took %v", took)
	}
	if fc.off["n2"] != 0 || fc.off["n4"] != 0 || c.Healing() != nil {
		t.Fatalf("after reset %v, healing %v", fc.off, c.Healing())
	}
}

// A clock that runs fast gains Rate of the time it ran, reaching Duration*Rate when the fault's
// Apply returns, and the reset steps it back to the real time.
func TestClockRunsFastThenResets(t *testing.T) {
	c := buildClockSpec(t, "clock:jump=fast:rate=0.5:duration=40ms")
	fc := &fakeClocks{}
	c.Clocks = fc
	ctx := context.Background()
	op := Op{F: FRunFast, Nodes: []string{"n1"}, Effect: history.EffectFault}
	if got := jumpOp(JumpFast); got != FRunFast {
		t.Fatalf("jump fast plans %q", got)
	}
	ev := history.Event{Type: history.Invoke}
	c.Annotate(ctx, op, &ev, nil)
	if ev.Offsets["n1"] != int64(20*time.Millisecond) {
		t.Fatalf("invoke offsets %v: want where the clock will have got to, 20ms", ev.Offsets)
	}
	start := time.Now()
	if err := c.Apply(ctx, op); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 40*time.Millisecond {
		t.Fatalf("run-fast returned after %v, before its 40ms", took)
	}
	if fc.off["n1"] != 20*time.Millisecond {
		t.Fatalf("offset after running fast = %v, want 20ms", fc.off["n1"])
	}
	r, err := c.Resolve(ctx, Op{F: FReset, Effect: history.EffectHeal})
	if err != nil || r.F != FReset {
		t.Fatalf("reset of a clock ahead resolved to %+v, %v: want a plain step back", r, err)
	}
	if err := c.Apply(ctx, r); err != nil || fc.off["n1"] != 0 {
		t.Fatalf("after the reset the offset is %v (%v)", fc.off["n1"], err)
	}
	if _, err := Build(mustSpec(t, "clock:jump=fast:rate=0"), clockEnv()); err == nil || !strings.Contains(err.Error(), "rate must be above 0") {
		t.Fatalf("rate=0 accepted: %v", err)
	}
}
