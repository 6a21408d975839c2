package harness

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/systems"
)

// The role changes a run records are what the sentinels say: after the primary is killed, the
// history's role change names as primary the node every sentinel answers to SENTINEL
// get-master-addr-by-name, and the history with it validates.
func TestRoleChangesAgreeWithTheSentinels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := Config{Lock: "sentinel", TTL: Duration(2 * time.Second), TimeLimit: Duration(10 * time.Second), Clients: 1, Keys: 1, Store: t.TempDir()}
	if err := cfg.Resolve(); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	sys, err := startSystem(ctx, cfg, t.TempDir(), "", nil, log)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.close()
	roles := make(chan history.Event, 16)
	path := filepath.Join(t.TempDir(), history.FileName)
	rec, err := history.Create(path, time.Now(), func(e *history.Event) {
		if e.Process == history.SystemProcess {
			roles <- *e
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := sys.recordRoles(rec, log)
	if err := sys.sut.Backend().Kill("n1"); err != nil {
		t.Fatal(err)
	}
	var change history.Event
	select {
	case change = <-roles:
	case <-time.After(2 * time.Minute):
		// Only ends a hang: under load Sentinel's election can take several tries (each failed one
		// waits twice the failover timeout), as systems' TestFailoverRolesAgreeWithTheSentinels allows.
		t.Fatal("no role change recorded within 2 minutes of killing the primary")
	}
	stop()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	primary := ""
	for n, r := range change.Roles {
		if r == string(systems.RolePrimary) {
			primary = n
		}
	}
	if primary == "" || primary == "n1" || change.Roles["n1"] != string(systems.RoleReplica) || change.Note == "" {
		t.Fatalf("role change %+v: want a replica promoted, n1 a replica, and a note", change)
	}
	byAddr := map[string]string{}
	eps, err := sys.sut.Endpoints(cfg.GroupNames()[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range eps {
		byAddr[e.Known] = e.Node
	}
	for _, n := range sys.sut.Nodes() {
		if n.Role != systems.RoleSentinel {
			continue
		}
		sc := redis.NewSentinelClient(&redis.Options{Addr: n.Addr, Protocol: 2, DisableIdentity: true})
		var said string
		deadline := time.Now().Add(10 * time.Second)
		for said != primary && time.Now().Before(deadline) {
			if a, err := sc.GetMasterAddrByName(ctx, systems.MasterName).Result(); err == nil && len(a) == 2 {
				said = byAddr[net.JoinHostPort(a[0], a[1])]
			}
			time.Sleep(100 * time.Millisecond)
		}
		sc.Close()
		if said != primary {
			t.Errorf("sentinel %s names %q the master, the history %s", n.Name, said, primary)
		}
	}
	l, err := history.ReadLogFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checker.CheckLog(l, checker.Options{}); err != nil {
		t.Fatalf("the history with its role changes does not check: %v", err)
	}
}
