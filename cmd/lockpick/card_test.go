package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/harness"
	"github.com/lockpick-dev/lockpick/locks"
)

// battery derives lock's rows with the card's base; it fails the test when the base does not resolve.
func battery(t *testing.T, cfg harness.Config) map[string]cardRow {
	t.Helper()
	cfg.Store = t.TempDir()
	rows, err := batteryFor(cardBase(cfg))
	if err != nil {
		t.Fatalf("%s: %v", cfg.Lock, err)
	}
	byID := map[string]cardRow{}
	for _, r := range rows {
		if _, dup := byID[r.id]; dup {
			t.Errorf("%s: row %s twice", cfg.Lock, r.id)
		}
		byID[r.id] = r
	}
	return byID
}

// runs says which of ids run (true) or are skipped (false) in rows, and complains otherwise.
func expectRows(t *testing.T, lock string, rows map[string]cardRow, run, skipped []string) {
	t.Helper()
	for _, id := range run {
		r, ok := rows[id]
		if !ok || r.skip != "" {
			t.Errorf("%s: row %s should run: %+v", lock, id, r.skip)
		}
	}
	for _, id := range skipped {
		if r, ok := rows[id]; !ok || r.skip == "" {
			t.Errorf("%s: row %s should be skipped with a reason", lock, id)
		}
	}
}

// Every lock gets the same battery, shaped only by what it declares: extend rows where it extends,
// re-entry where it re-enters, a fenced counter where it has tokens, the system's own fault rows.
func TestBatteryFollowsWhatTheLockDeclares(t *testing.T) {
	always := []string{"deadline", "slow-group", "node-timeouts", "restart", "restart-delayed",
		"partition-majority", "partition-holder", "node-pause", "client-pause", "latency", "client-crash", "counter-unguarded"}
	single := battery(t, harness.Config{Lock: "single"})
	expectRows(t, "single", single, append(always, "drift", "fractional-ttl", "extend", "extend-slow", "clock-forward", "clock-back", "counter-cas", "restart-aof-always"),
		[]string{"reentry", "partition-minority", "client-clock-ahead", "client-clock-behind"})
	// The client-clock rows run only where the fault moves a clock the lock reads: Options.Clock
	// (setnx-getset, rueidislock) or a client program's (the shim).
	for _, lock := range []string{"setnx-getset", "rueidislock", "py-redis", locks.MutantPrefix + "single-wall-clock"} {
		expectRows(t, lock, battery(t, harness.Config{Lock: lock}), []string{"client-clock-ahead", "client-clock-behind"}, nil)
	}
	if skip := single["client-clock-ahead"].skip; !strings.Contains(skip, "Go's own clock") {
		t.Errorf("single's client-clock row says: %q", skip)
	}
	if _, ok := single["counter-fenced"]; ok {
		t.Errorf("single hands out no tokens, but has a fenced row")
	}
	if !strings.Contains(single["counter-unguarded"].must, "hands none out") {
		t.Errorf("single's inherent row says: %q", single["counter-unguarded"].must)
	}

	redlock := battery(t, harness.Config{Lock: "redlock"})
	expectRows(t, "redlock", redlock, []string{"partition-minority", "extend"}, []string{"reentry"})
	if !strings.Contains(redlock["slow-group"].config(cardBase(harness.Config{Lock: "redlock"})).Nemesis, "target=minority") {
		t.Errorf("redlock's slow group should slow a minority")
	}

	fenced := battery(t, harness.Config{Lock: "fenced"})
	expectRows(t, "fenced", fenced, []string{"counter-fenced"}, nil)
	if r := fenced["counter-fenced"]; r.group != groupRemedy || r.remedies != "counter-unguarded" {
		t.Errorf("fenced counter row: %+v", r)
	}

	watchdog := battery(t, harness.Config{Lock: "watchdog"})
	expectRows(t, "watchdog", watchdog, []string{"reentry"}, []string{"extend", "extend-slow"})

	etcd := battery(t, harness.Config{Lock: "etcd"})
	expectRows(t, "etcd", etcd, []string{"leader-kill", "leader-wipe", "partition-minority", "counter-fenced"},
		[]string{"drift", "clock-forward", "clock-back", "restart-aof-always", "fractional-ttl", "extend"})

	sentinel := battery(t, harness.Config{Lock: "sentinel"})
	expectRows(t, "sentinel", sentinel, []string{"failover"}, []string{"partition-minority"})

	gozero := battery(t, harness.Config{Lock: "go-zero"})
	expectRows(t, "go-zero", gozero, []string{"deadline"}, []string{"fractional-ttl"})

	// ZooKeeper elects a leader as etcd does: its leader rows, and node-pause on the leader (its
	// lease probe names every member, so a random majority would only stop the quorum).
	zk := battery(t, harness.Config{Lock: "go-zk"})
	expectRows(t, "go-zk", zk, []string{"leader-kill", "leader-wipe", "leader-partition", "leader-latency", "partition-minority", "counter-fenced"},
		[]string{"extend", "reentry", "restart-aof-always"})
	for _, lock := range []string{"etcd", "go-zk"} {
		if n := battery(t, harness.Config{Lock: lock})["node-pause"].config(cardBase(harness.Config{Lock: lock})).Nemesis; n != "pause:target=leader" {
			t.Errorf("%s's node-pause: %s, want the leader paused", lock, n)
		}
	}

	if n := zk["partition-holder"].config(cardBase(harness.Config{Lock: "go-zk"})).Nemesis; !strings.Contains(n, "kind=client-all") {
		t.Errorf("go-zk's partition-holder: %s, want the holder's group cut from every member", n)
	}

	pg := battery(t, harness.Config{Lock: "pg-advisory"})
	expectRows(t, "pg-advisory", pg, []string{"drift", "clock-forward", "counter-cas"}, []string{"partition-minority", "restart-aof-always", "failover", "failover-lag"})
	// With a streaming replica (--replicas 1) the primary's failover to it, with and without lag.
	pgReplica := battery(t, harness.Config{Lock: "pg-lease", Replicas: 1})
	expectRows(t, "pg-lease with a replica", pgReplica, []string{"failover", "failover-lag", "counter-fenced"}, []string{"partition-minority"})
	if n := pgReplica["failover-lag"].config(cardBase(harness.Config{Lock: "pg-lease", Replicas: 1})).Nemesis; n != "failover:stall=1:wait=10s:detect=1s:interval=5s" {
		t.Errorf("pg-lease's failover-lag: %s", n)
	}
	if _, ok := pg["leader-kill"]; ok {
		t.Errorf("postgres is one primary, but has a leader row")
	}
	if n := pg["node-pause"].config(cardBase(harness.Config{Lock: "pg-advisory"})).Nemesis; n != "pause:target=holder-majority" {
		t.Errorf("pg-advisory's node-pause: %s", n)
	}
	for _, id := range []string{"partition-majority", "partition-holder"} {
		if n := pg[id].config(cardBase(harness.Config{Lock: "pg-advisory"})).Nemesis; !strings.Contains(n, "mode=stall") {
			t.Errorf("pg-advisory's %s: %s, want a stall (a drop's heal closes the session)", id, n)
		}
	}
	if n := single["partition-majority"].config(cardBase(harness.Config{Lock: "single"})).Nemesis; !strings.Contains(n, "mode=drop") {
		t.Errorf("single's partition-majority: %s", n)
	}
	if !strings.Contains(pg["restart"].what, "postgres keeps its data") {
		t.Errorf("pg-advisory's restart says: %q", pg["restart"].what)
	}
}

// A ZooKeeper lock's TTL is its session's timeout: the card runs sessions of at least the family's
// SessionTTL, skips fractional-ttl (nothing is sent in whole seconds) and, for go-zk alone, the
// client-clock rows (it runs inside lockpick and reads Go's own clock); the programs' clocks are
// moved by the shim, so their client-clock rows run.
func TestBatteryOfZooKeeperLocks(t *testing.T) {
	leader := []string{"deadline", "node-timeouts", "restart", "partition-holder", "client-pause", "leader-kill", "leader-partition", "counter-fenced"}
	for _, lock := range []string{"go-zk", "kazoo", "curator"} {
		rows := battery(t, harness.Config{Lock: lock})
		clock := []string{"client-clock-ahead", "client-clock-behind"}
		if lock == "go-zk" {
			expectRows(t, lock, rows, leader, append(clock, "fractional-ttl"))
			if !strings.Contains(rows["client-clock-ahead"].skip, "Go's own clock") {
				t.Errorf("go-zk's client-clock row says: %q", rows["client-clock-ahead"].skip)
			}
		} else {
			expectRows(t, lock, rows, append(leader, clock...), []string{"fractional-ttl"})
		}
		if !strings.Contains(rows["fractional-ttl"].skip, "session timeout") {
			t.Errorf("%s's fractional-ttl says: %q", lock, rows["fractional-ttl"].skip)
		}
		if ttl := time.Duration(cardBase(harness.Config{Lock: lock}).TTL); ttl != 3*time.Second {
			t.Errorf("%s's card runs sessions of %v, want 3s", lock, ttl)
		}
	}
	if ttl := time.Duration(cardBase(harness.Config{Lock: "pg-lease"}).TTL); ttl != cardTTL {
		t.Errorf("pg-lease's card TTL %v, want %v: only session families get longer ones", ttl, cardTTL)
	}
}

// A client program's battery follows the capabilities its user declares, on the system and nodes
// the user names.
func TestBatteryOfAClientProgram(t *testing.T) {
	prog := []string{"/bin/true"}
	plain := battery(t, harness.Config{Lock: locks.ClientLock, ClientCmd: prog})
	expectRows(t, "client", plain, []string{"deadline"}, []string{"extend", "reentry", "partition-minority"})
	if !strings.Contains(plain["extend"].skip, "--client-capabilities extend") {
		t.Errorf("the extend row should say how to declare extend: %q", plain["extend"].skip)
	}
	rich := battery(t, harness.Config{Lock: locks.ClientLock, ClientCmd: prog, ClientCaps: []string{"extend", "token", "reentrant"}, Nodes: 5})
	expectRows(t, "client", rich, []string{"extend", "extend-slow", "reentry", "partition-minority", "counter-fenced"}, nil)
	if name := rich["deadline"].config(cardBase(harness.Config{Lock: locks.ClientLock, ClientCmd: []string{"/usr/bin/python3", "my lock.py"}})).Name; name != "card-my-lock.py-deadline" {
		t.Errorf("a program's run is named %s", name)
	}
	onEtcd := battery(t, harness.Config{Lock: locks.ClientLock, ClientCmd: prog, System: "etcd"})
	expectRows(t, "client on etcd", onEtcd, []string{"leader-kill"}, []string{"clock-forward"})
}

// Rows are named by what they do to the lock, every row has words, and the run names are plain.
func TestBatteryRowsAreNamed(t *testing.T) {
	for _, lock := range []string{"single", "redlock", "etcd", "sentinel", "watchdog", "py-tooz"} {
		for id, r := range battery(t, harness.Config{Lock: lock}) {
			if r.what == "" || r.group == "" {
				t.Errorf("%s row %s lacks words or group: %+v", lock, id, r)
			}
			if err := harness.CheckName(r.config(cardBase(harness.Config{Lock: lock})).Name); err != nil {
				t.Errorf("%s row %s: %v", lock, id, err)
			}
			if r.remedies != "" && r.remedy == "" {
				t.Errorf("%s row %s remedies %s but says no remedy", lock, id, r.remedies)
			}
		}
	}
}

// Bad input to card is one line and exit 255.
func TestCardBadInput(t *testing.T) {
	bin := build(t)
	for _, args := range [][]string{
		{"card"},
		{"card", "zookeeper"},
		{"card", "single", "--client-cmd", "python3 x.py"},
		{"card", "--client-cmd", "/no/such/program"},
		{"card", "single", "--rows", "meteor"},
		{"card", "single", "--seeds", "1,x"},
		{"card", "single", "--nodes", "3"},
	} {
		out, err := exec.Command(bin, append(args, "--store", t.TempDir())...).CombinedOutput()
		if code := exitCode(err); code != 255 || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
			t.Errorf("%v: exit %d, want 255 with one line:\n%s", args, code, out)
		}
	}
}

// A tiny card on the single lock: the lock keeps its promise with no fault and breaks it under an
// immediate restart; the card says so, exits 1, and --from re-judges the same runs.
func TestTinyCard(t *testing.T) {
	t.Parallel() // waits on the programs it runs: runs beside the others (issue 28)
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server")
	}
	bin := build(t)
	store := t.TempDir()
	report := filepath.Join(t.TempDir(), "card.md")
	args := []string{"card", "single", "--rows", "deadline,restart", "--seeds", "1", "--time-limit", "4s", "--store", store, "--report", report}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if code := exitCode(err); code != 1 || !strings.Contains(string(out), "UNSAFE under: restart") {
		t.Fatalf("exit %d, want 1 and UNSAFE under: restart:\n%s", code, out)
	}
	md, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"**UNSAFE under: restart**", "| deadline |", "kept its promise", "| restart |", "broke its promise", "card-single-restart/"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("card lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(string(md), store) {
		t.Errorf("the report names a machine path (%s):\n%s", store, md)
	}
	// A later run of a row that never wrote its history (a card cut short) is passed over: the
	// finished run stands for its seed, and no row says "could not run".
	unfinished(t, store, "card-single-restart")
	out, err = exec.Command(bin, append(args[:len(args)-2], "--from", store)...).CombinedOutput()
	if code := exitCode(err); code != 1 || strings.Contains(string(out), "could not run") {
		t.Errorf("--from: exit %d, want 1 and every run found:\n%s", code, out)
	}
	cards, _ := filepath.Glob(filepath.Join(store, "card-single", "*", "card.json"))
	if len(cards) != 2 {
		t.Fatalf("cards: %v", cards)
	}
	var card struct {
		Headline string
		Rows     []struct{ ID, Skipped string }
	}
	b, _ := os.ReadFile(cards[1])
	ran := 0
	if json.Unmarshal(b, &card) == nil {
		for _, r := range card.Rows {
			if r.Skipped == "" {
				ran++
			}
		}
	}
	// The rows --rows left out stay on the card, skipped, so that it never reads as the whole battery.
	if card.Headline != "UNSAFE under: restart" || ran != 2 || len(card.Rows) <= 2 {
		t.Errorf("card.json: %s", b)
	}
}

// unfinished adds to store a newer run of row with the latest run's config and no history, as a
// card killed while the run went leaves it.
func unfinished(t *testing.T, store, row string) {
	t.Helper()
	runs, _ := filepath.Glob(filepath.Join(store, row, "*"))
	if len(runs) == 0 {
		t.Fatalf("no run of %s in %s", row, store)
	}
	cfg, err := os.ReadFile(filepath.Join(runs[len(runs)-1], "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(store, row, "99991231T235959.999Z")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
}

// --all-seeds runs a broken row's later seeds: single breaks under an immediate restart in each of
// two seeds, and the card says 2 / 2 where without the flag it says 1 / 1 and one left out.
func TestCardAllSeeds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server")
	}
	bin := build(t)
	for flag, want := range map[string]string{"--all-seeds": "| 2 / 2 |", "--all-seeds=false": "| 1 / 1 (1 not run: broken already) |"} {
		report := filepath.Join(t.TempDir(), "card.md")
		out, err := exec.Command(bin, "card", "single", "--rows", "restart", "--seeds", "1,2", "--time-limit", "4s", "--parallel", "1",
			"--store", t.TempDir(), "--report", report, flag).CombinedOutput()
		if code := exitCode(err); code != 1 {
			t.Fatalf("%s: exit %d, want 1:\n%s", flag, code, out)
		}
		md, _ := os.ReadFile(report)
		if !strings.Contains(string(md), want) {
			t.Errorf("%s: card lacks %q:\n%s", flag, want, md)
		}
	}
}

func TestCardErrorsNameRunsRelativeToTheStore(t *testing.T) {
	err := fmt.Errorf("check /x/store/card-go-zero-node-pause/1: /x/store/card-go-zero-node-pause/1/history.jsonl: line 3: bad")
	if got, want := relativeError("/x/store", err), "check card-go-zero-node-pause/1: card-go-zero-node-pause/1/history.jsonl: line 3: bad"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// card --from a directory with no run of the card refuses in one line, and writes no card.
func TestCardFromRefusesAStoreWithoutItsRuns(t *testing.T) {
	bin := build(t)
	for _, from := range []string{filepath.Join(t.TempDir(), "no-such-store"), t.TempDir()} {
		store := t.TempDir()
		out, err := exec.Command(bin, "card", "single", "--from", from, "--store", store).CombinedOutput()
		if code := exitCode(err); code != 255 || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 || !strings.Contains(string(out), "--from") {
			t.Errorf("--from %s: exit %d, want 255 with one line naming --from:\n%s", from, code, out)
		}
		if left, _ := os.ReadDir(store); len(left) != 0 {
			t.Errorf("--from %s wrote into the store: %v", from, left)
		}
	}
}

// The time left is the remaining runs' plans, scaled by how long finished runs took beside their
// plans, shared among the runs going at once.
func TestCardTimeLeft(t *testing.T) {
	for _, c := range []struct {
		plannedLeft, ranPlan, ran time.Duration
		parallel                  int
		want                      time.Duration
	}{
		{10 * time.Minute, 0, 0, 2, 5 * time.Minute},                            // nothing ran yet: the plan
		{10 * time.Minute, time.Minute, 2 * time.Minute, 2, 10 * time.Minute},   // runs take twice their plan
		{10 * time.Minute, 2 * time.Minute, time.Minute, 1, 5 * time.Minute},    // and half
		{0, 5 * time.Minute, 6 * time.Minute, 2, 0},                             // done
		{-time.Minute, 5 * time.Minute, 6 * time.Minute, 2, 0},                  // runs left out: never negative
		{3 * time.Minute, 3 * time.Minute, 3 * time.Minute, 0, 3 * time.Minute}, // parallel 0 taken as 1
	} {
		if got := timeLeft(c.plannedLeft, c.ranPlan, c.ran, c.parallel); got != c.want {
			t.Errorf("timeLeft(%v, %v, %v, %d) = %v, want %v", c.plannedLeft, c.ranPlan, c.ran, c.parallel, got, c.want)
		}
	}
	for d, want := range map[time.Duration]string{
		0: "nothing left", 3 * time.Second: "about 10 s left", 44 * time.Second: "about 40 s left",
		150 * time.Second: "about 3 min left", 65 * time.Minute: "about 1 h 5 min left",
	} {
		if got := aboutLeft(d); got != want {
			t.Errorf("aboutLeft(%v) = %q, want %q", d, got, want)
		}
	}
}
