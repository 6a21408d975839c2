package systems

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// The registry lists every family once, and refuses an unknown name with the names it knows.
func TestRegistryNamesAndRefusals(t *testing.T) {
	if got := Names(); !slices.Equal(got, []string{"redis-masters", "redis-sentinel", "etcd"}) {
		t.Fatalf("Names() = %v", got)
	}
	for _, name := range Names() {
		topo, err := Lookup(name)
		if err != nil || topo.Name() != name {
			t.Fatalf("Lookup(%s) = %v, %v", name, topo, err)
		}
	}
	if _, err := Start(context.Background(), "zookeeper", Config{}); err == nil || !strings.Contains(err.Error(), "redis-masters, redis-sentinel, etcd") {
		t.Fatalf("Start(zookeeper) = %v, want a refusal naming the systems", err)
	}
}

// Each topology's defaults and size rules, as Layout applies them before anything starts.
func TestLayoutDefaultsAndRules(t *testing.T) {
	for _, c := range []struct {
		name  string
		cfg   Config
		nodes string
		err   string
	}{
		{"redis-masters", Config{Nodes: 3}, "n1:master n2:master n3:master", ""},
		{"redis-masters", Config{}, "", "at least one node"},
		{"redis-sentinel", Config{}, "n1:primary n2:replica n3:replica s1:sentinel s2:sentinel s3:sentinel", ""},
		{"redis-sentinel", Config{Sentinel: SentinelConfig{Replicas: 10}}, "", "between 1 and 9"},
		{"etcd", Config{}, "e1:follower e2:follower e3:follower", ""},
		{"etcd", Config{Etcd: EtcdConfig{Members: 5}}, "e1:follower e2:follower e3:follower e4:follower e5:follower", ""},
	} {
		nodes, err := Layout(c.name, c.cfg)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Layout(%s, %+v) = %v, want an error saying %q", c.name, c.cfg, err, c.err)
			}
			continue
		}
		var got []string
		for _, n := range nodes {
			got = append(got, n.Name+":"+string(n.Role))
		}
		if err != nil || strings.Join(got, " ") != c.nodes {
			t.Errorf("Layout(%s) = %v, %v, want %s", c.name, got, err, c.nodes)
		}
	}
}

// What each pair offers, and a refusal that names a backend that has it.
func TestCapabilities(t *testing.T) {
	has := func(system, backend string, c Capability) bool {
		caps, err := Capabilities(system, backend)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(caps, c)
	}
	for _, c := range []struct {
		system, backend string
		cap             Capability
		want            bool
	}{
		{"redis-masters", BackendLocal, CapProcesses, true},
		{"redis-masters", BackendLocal, CapClocks, true},
		{"redis-masters", BackendLocal, CapNetCuts, false},
		{"redis-masters", BackendDocker, CapNetCuts, true},
		{"redis-masters", BackendDocker, CapPeerCuts, false},
		{"redis-sentinel", BackendDocker, CapPeerLatency, true},
		{"redis-sentinel", BackendLocal, CapWriteHolds, true},
		{"etcd", BackendLocal, CapClocks, false},
		{"etcd", BackendDocker, CapWriteHolds, false},
		{"etcd", BackendDocker, CapPeerCuts, true},
		{"redis-masters", BackendExternal, CapLinks, true},
		{"redis-masters", BackendExternal, CapProcesses, false},
	} {
		if got := has(c.system, c.backend, c.cap); got != c.want {
			t.Errorf("%s on %s offers %s: %v, want %v", c.system, c.backend, c.cap, got, c.want)
		}
	}
	if err := Offers("redis-sentinel", "", CapPeerCuts); err == nil || !strings.Contains(err.Error(), "--backend docker") {
		t.Errorf("Offers(sentinel, local, peer cuts) = %v, want a refusal naming --backend docker", err)
	}
	if err := Offers("etcd", BackendDocker, CapClocks); err == nil || !strings.Contains(err.Error(), "on any backend") {
		t.Errorf("Offers(etcd, docker, clocks) = %v, want a refusal on every backend", err)
	}
}

// The answer agrees with the running system: the local backend of redis-masters is no NetCutter,
// PeerCutter or PeerSlower, and holds writes.
func TestCapabilitiesAgreeWithALocalSystem(t *testing.T) {
	sys, err := Start(context.Background(), "redis-masters", Config{Dir: t.TempDir(), Groups: []string{"c1"}, Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	b := sys.Backend()
	_, net := b.(interface {
		CutNetwork(ctx context.Context, node, mode string) error
	})
	_, peers := b.(PeerCutter)
	_, slow := b.(PeerSlower)
	if net || peers || slow {
		t.Fatalf("the local backend cuts networks %v, peers %v, slows peers %v", net, peers, slow)
	}
	held := false
	if err := sys.HoldWrites(context.Background(), "n1", time.Second, func(context.Context) error { held = true; return nil }); err != nil || !held {
		t.Fatalf("HoldWrites: %v (ran %v)", err, held)
	}
}
