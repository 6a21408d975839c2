package systems

import (
	"strings"
	"testing"
	"time"
)

// Each family fills in its own default size and refuses the sizes of another, naming the option.
func TestSizesAreTheFamilys(t *testing.T) {
	for _, c := range []struct {
		system string
		in     Size
		want   Size
		err    string
	}{
		{"redis-masters", Size{Nodes: 5}, Size{Nodes: 5}, ""},
		{"redis-masters", Size{Replicas: 1}, Size{}, "--replicas and --sentinels size redis-sentinel"},
		{"redis-sentinel", Size{}, Size{Replicas: 2, Sentinels: 3}, ""},
		{"redis-sentinel", Size{Nodes: 3}, Size{}, "drop --nodes"},
		{"redis-sentinel", Size{External: true, Sentinels: 3}, Size{}, "the sentinels report them"},
		{"etcd", Size{}, Size{Nodes: 3}, ""},
		{"etcd", Size{Nodes: 10}, Size{}, "1 to 9 members"},
	} {
		tp, err := Lookup(c.system)
		if err != nil {
			t.Fatal(err)
		}
		got := c.in
		err = tp.Size(&got)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s %+v: error %v, want %q", c.system, c.in, err, c.err)
		case c.err == "" && err != nil:
			t.Errorf("%s %+v: %v", c.system, c.in, err)
		case c.err == "" && (got.Nodes != c.want.Nodes || got.Replicas != c.want.Replicas || got.Sentinels != c.want.Sentinels):
			t.Errorf("%s %+v: sized %+v, want %+v", c.system, c.in, got, c.want)
		}
	}
}

// A dead holder's etcd lease outlives it by its TTL in whole seconds plus the election timeout; a
// Redis key by its TTL.
func TestExpiryOfALease(t *testing.T) {
	etcd, _ := Lookup("etcd")
	if got := etcd.Traits().Expiry(1500 * time.Millisecond); got != 2*time.Second+EtcdElectionTimeout {
		t.Errorf("etcd: %v", got)
	}
	redis, _ := Lookup("redis-masters")
	if got := redis.Traits().Expiry(1500 * time.Millisecond); got != 1500*time.Millisecond {
		t.Errorf("redis-masters: %v", got)
	}
}

// The backend's check names no family: each family says where its nodes cannot run (Traits.NotOn),
// and CheckBackend answers with the family's own line; everywhere else it runs.
func TestCheckBackendAsksTheFamily(t *testing.T) {
	refused := 0
	for _, top := range topologies() {
		for _, backend := range Backends() {
			err := CheckBackend(top.Name(), backend)
			why, notOn := top.Traits().NotOn[backend]
			switch {
			case notOn && (err == nil || err.Error() != why):
				t.Errorf("%s on %s: %v, want the family's refusal %q", top.Name(), backend, err, why)
			case !notOn && err != nil:
				t.Errorf("%s on %s: %v, want it to run", top.Name(), backend, err)
			}
			if notOn {
				refused++
			}
		}
	}
	if refused == 0 {
		t.Error("no family refuses any backend: the table of refusals is not read")
	}
	if err := CheckBackend("redis-masters", "kubernetes"); err == nil || !strings.Contains(err.Error(), "unknown backend") {
		t.Errorf("an unknown backend: %v, want it refused", err)
	}
}
