package nemesis

import (
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// Every kind's parameter table is what its builder reads: the same names, types and allowed values,
// so help, completion and the parse-time checks cannot drift from the nemesis's code.
func TestParamTablesMatchTheBuilders(t *testing.T) {
	env := Env{Nodes: []string{"n1", "n2", "n3", "n4", "n5"}, Groups: []string{"c1", "c2"}, Keys: []string{"k"},
		TTL: 2 * time.Second, Interval: 5 * time.Second, NodeTimeout: 100 * time.Millisecond, RestartDelay: 3 * time.Second,
		Log: slog.New(slog.DiscardHandler)}
	for _, k := range kinds() {
		p := NewParams(Spec{Name: k.Name})
		_, _ = k.build(env, p) // the example's own errors do not matter: only what was read
		if got, want := slices.Sorted(maps.Keys(p.used)), k.paramNames(); !slices.Equal(got, want) {
			t.Errorf("%s: the builder reads %v, the table lists %v", k.Name, got, want)
			continue
		}
		for _, param := range k.Params {
			read := p.types[param.Name]
			if param.Type == TypeGroup {
				read = TypeGroup
			}
			if read != param.Type {
				t.Errorf("%s %s: read as %s, listed as %s", k.Name, param.Name, p.types[param.Name], param.Type)
			}
			allowed := p.allowed[param.Name]
			if param.Type == TypeGroup {
				allowed = slices.DeleteFunc(slices.Clone(allowed), func(v string) bool { return slices.Contains(env.Groups, v) })
			}
			if !slices.Equal(slices.Sorted(slices.Values(allowed)), slices.Sorted(slices.Values(param.Values))) {
				t.Errorf("%s %s: the builder allows %v, the table lists %v", k.Name, param.Name, allowed, param.Values)
			}
			if param.Help == "" {
				t.Errorf("%s %s: no help", k.Name, param.Name)
			}
		}
		if k.Does == "" {
			t.Errorf("%s: says nothing of what it does", k.Name)
		}
	}
}

// A fault is checked against its kind when parsed: unknown parameters and values of the wrong type
// are refused there, and its needs include those its parameters add.
func TestParseFaults(t *testing.T) {
	for text, want := range map[string]string{
		"restart:speed=9":         `unknown parameter "speed": restart takes at, interval, target, wait, wipe`,
		"clock:jump=sideways":     `"sideways" is not allowed`,
		"pause:duration=forever":  "use one of below (TTL/2), around (TTL), above (2×TTL)",
		"failover:stall=2":        "stall=2 is not a share",
		"latency:group=everybody": "not a client group",
		"partition:group=c0":      "not a client group",
		"none:x=1":                "none takes no parameters",
		"pause,pause":             "given twice",
	} {
		if _, err := ParseFaults(text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", text, err, want)
		}
	}
	faults, err := ParseFaults("latency:paths=peers,clock:reset=quiet,partition:group=c2,pause:duration=above,failover:kind=kill+pause")
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []Capability{Links | PeerLatency, NodeClocks | WriteHolds | Links, Links, NodeSignals, Promotion | NodeProcesses | PeerCuts | Links | NodeSignals} {
		if got := faults[i].Needs(); got != want {
			t.Errorf("%s needs %s, want %s", faults[i], got, want)
		}
	}
	if !faults[1].TouchesLinks() || !faults[1].MovesClocks() || faults[3].TouchesLinks() {
		t.Errorf("links and clocks: clock:reset=quiet touches links and moves clocks, pause neither")
	}
}

// A fault the system cannot host is refused in one line that names the fault, the capability it
// lacks, why, and what has it; the faults it can host pass.
func TestOfferRefusals(t *testing.T) {
	for _, c := range []struct {
		system, backend, faults string
		want                    []string
	}{
		{"redis-masters", "external", "pause", []string{"--nemesis pause pauses a server's process (node signals)", "someone else's", "use --backend local or docker or ssh, or client-side faults (partition, latency, client-pause, client-crash, client-clock)"}},
		{"etcd", "local", "clock", []string{"(node clocks)", "without libc", "a lock that runs on redis-masters or redis-sentinel", "another fault (restart,"}},
		{"redis-masters", "local", "partition:paths=peers", []string{"--nemesis partition with paths=peers needs peer cuts", "never talk to each other", "drop paths=peers"}},
		{"redis-sentinel", "external", "latency:paths=peers", []string{"with paths=peers needs peer latency", "--backend local or docker", "drop paths=peers"}},
		{"redis-masters", "local", "failover", []string{"(promotion)", "a lock that runs on redis-sentinel"}},
		{"redis-sentinel", "local", "netcut", []string{"(network cuts)", "loopback", "use --backend docker or ssh, or partition:kind=isolate"}},
		{"etcd", "local", "clock:reset=quiet", []string{"(node clocks)"}},
		{"redis-sentinel", "local", "clock:reset=quiet", nil},
		{"redis-sentinel", "docker", "netcut,failover,latency:paths=peers", nil},
		{"etcd", "external", "partition,latency,client-pause,client-crash,client-clock", nil},
	} {
		faults, err := ParseFaults(c.faults)
		if err != nil {
			t.Fatal(err)
		}
		err = staticOffer(c.system, c.backend).Check(faults)
		if c.want == nil {
			if err != nil {
				t.Errorf("%s on %s %s: refused: %v", c.faults, c.system, c.backend, err)
			}
			continue
		}
		if err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s on %s %s: %v, want a one-line refusal", c.faults, c.system, c.backend, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s on %s %s: %q lacks %q", c.faults, c.system, c.backend, err, w)
			}
		}
	}
}

// A capability absent for a reason that carries its own fix (the docker backend's missing network
// tools) is refused with that reason alone.
func TestOfferRefusalWithItsOwnFix(t *testing.T) {
	o := staticOffer("etcd", "docker")
	o.lack(NetCuts|PeerCuts, "netcut needs root: run lockpick as root", true)
	faults, _ := ParseFaults("pause,netcut")
	err := o.Check(faults)
	if err == nil || err.Error() != "--nemesis netcut cuts a server's own network interface (network cuts), and netcut needs root: run lockpick as root" {
		t.Fatalf("got %v", err)
	}
}

// Help lists every nemesis with its parameters; completion offers the table's values.
func TestDescribeAndParamValues(t *testing.T) {
	help := Describe()
	for _, k := range kinds() {
		if !strings.Contains(help, "\n"+k.Name+": ") {
			t.Errorf("help lacks %s", k.Name)
		}
	}
	if !strings.Contains(help, "paths=peers needs peer cuts") {
		t.Errorf("help does not say what paths=peers needs:\n%s", help)
	}
	v, err := ParamValues("partition")
	if err != nil || !slices.Contains(v["group"], GroupHolder) || !slices.Contains(v["kind"], PartBridge) {
		t.Fatalf("partition's values %v, %v", v, err)
	}
	if _, err := ParamValues("meteor"); err == nil {
		t.Fatal("an unknown nemesis has parameters")
	}
}
