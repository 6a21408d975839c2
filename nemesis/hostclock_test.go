package nemesis

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// source=host moves the hosts' clocks: it needs host clocks instead of the shim, which only the
// ssh backend offers; elsewhere it is refused in one line that names the parameter and the fix.
func TestHostClockSourceNeeds(t *testing.T) {
	faults, err := ParseFaults("clock:source=host")
	if err != nil {
		t.Fatal(err)
	}
	if n := faults[0].Needs(); !n.Has(HostClocks) || n.Has(NodeClocks) || faults[0].MovesClocks() {
		t.Errorf("clock:source=host needs %s", n)
	}
	if shim, _ := ParseFaults("clock"); shim[0].Needs().Has(HostClocks) || !shim[0].Needs().Has(NodeClocks) {
		t.Errorf("clock needs %s", shim[0].Needs())
	}
	err = Offered("redis-masters", "local", "", "").Check(faults)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "source=host") || !strings.Contains(err.Error(), "--backend ssh") {
		t.Errorf("on --backend local: %v", err)
	}
	if err := Offered("redis-masters", "ssh", "", "").Check(faults); err != nil {
		t.Errorf("on --backend ssh: %v", err)
	}
	// etcd's Go clock is beyond the shim, not beyond the host's clock.
	if err := Offered("etcd", "ssh", "", "").Check(faults); err != nil {
		t.Errorf("etcd on --backend ssh: %v", err)
	}
}

// A strobe and a slewing reset are round trips over SSH every few milliseconds: refused with
// source=host, saying what to use.
func TestHostClockRefusesStrobeAndSlew(t *testing.T) {
	for _, text := range []string{"clock:source=host:jump=strobe", "clock:source=host:reset=slew:jump=back"} {
		spec, _ := ParseSpec(text)
		if _, err := Build(spec, clockEnv()); err == nil || !strings.Contains(err.Error(), "use ") {
			t.Errorf("%s: %v", text, err)
		}
	}
}

// hostKernels is the hosts' clocks as the test's nodes see them: nodes on one kernel share an
// offset. It stands in for the ssh backend's hosts.
type hostKernels struct {
	kernel map[string]string        // node -> kernel
	off    map[string]time.Duration // kernel -> offset
	rate   map[string]float64
}

func (h *hostKernels) SetClockOffset(n string, off time.Duration) error {
	h.off[h.kernel[n]] = off
	return nil
}

func (h *hostKernels) ClockOffset(n string) (time.Duration, error) { return h.off[h.kernel[n]], nil }

func (h *hostKernels) SetClockRate(n string, rate float64) error {
	k := h.kernel[n]
	if rate == 0 && h.rate[k] != 0 {
		h.off[k] += time.Millisecond // what the drift gained
	}
	h.rate[k] = rate
	return nil
}

func (h *hostKernels) Kin(n string) []string {
	var kin []string
	for _, m := range slices.Sorted(maps.Keys(h.kernel)) {
		if h.kernel[m] == h.kernel[n] {
			kin = append(kin, m)
		}
	}
	return kin
}

// A fault on a node whose host shares its kernel moves (and names) every node on that kernel, and
// the reset steps every one back; a drift runs at the rate for Duration, then stops.
func TestHostClockMovesKernelsAndResets(t *testing.T) {
	h := &hostKernels{kernel: map[string]string{"n1": "a", "n2": "a", "n3": "b", "n4": "c", "n5": "c"}, off: map[string]time.Duration{}, rate: map[string]float64{}}
	env := clockEnv()
	env.HostClocks = h
	spec, _ := ParseSpec("clock:source=host:jump=forward+fast:offset=1s:duration=20ms")
	n, err := Build(spec, env)
	if err != nil {
		t.Fatal(err)
	}
	c := n.(*Clock)
	ctx := context.Background()
	op, err := c.Resolve(ctx, Op{F: FBumpForward, Nodes: []string{"n2"}})
	if err != nil || !slices.Equal(op.Nodes, []string{"n1", "n2"}) {
		t.Fatalf("resolved to %v (%v), want n1 and n2 (one kernel)", op.Nodes, err)
	}
	if err := c.Apply(ctx, op); err != nil || h.off["a"] != time.Second || h.off["b"] != 0 {
		t.Fatalf("after the jump: %v, %v", h.off, err)
	}
	fast, _ := c.Resolve(ctx, Op{F: FRunFast, Nodes: []string{"n4"}})
	if err := c.Apply(ctx, fast); err != nil || h.rate["c"] != 0 || h.off["c"] != time.Millisecond {
		t.Fatalf("after the drift: rate %v offsets %v, %v", h.rate, h.off, err)
	}
	heal := c.Healing()
	if len(heal) != 1 || !slices.Equal(heal[0].Nodes, []string{"n1", "n2", "n4", "n5"}) {
		t.Fatalf("healing %+v", heal)
	}
	if err := c.Apply(ctx, heal[0]); err != nil || h.off["a"] != 0 || h.off["c"] != 0 {
		t.Fatalf("after the heal: %v, %v", h.off, err)
	}
}
