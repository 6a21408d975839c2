package harness

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockpick-dev/lockpick/systems"
)

// The ceiling: clients that never think and never hold, on one hot key, for ceilingTime.
const (
	ceilingClients = 10
	ceilingTime    = 4 * time.Second
)

// BenchmarkCeiling measures operations per second at the ceiling, side by side in one run: a bare
// go-redis loop (SET NX PX, then a compare-and-delete where it was granted), the harness with its
// clients reaching the nodes directly (no nemesis touches a link), and the harness with a link on
// every path (a latency nemesis that never fires). It reports each as ops/s and the harness's ratios
// to the bare loop. Run it with `go test ./harness -run '^$' -bench Ceiling -benchtime 1x`.
func BenchmarkCeiling(b *testing.B) {
	for _, c := range []struct {
		lock  string
		nodes int
	}{{"single", 1}, {"redlock", 5}} {
		b.Run(c.lock, func(b *testing.B) {
			for range b.N {
				bare := bareLoop(b, c.nodes)
				direct := harnessOps(b, c.lock, "none")
				linked := harnessOps(b, c.lock, "latency:interval=1h")
				b.ReportMetric(bare, "bare-ops/s")
				b.ReportMetric(direct, "harness-ops/s")
				b.ReportMetric(linked, "linked-ops/s")
				b.ReportMetric(direct/bare, "harness/bare")
				b.ReportMetric(linked/bare, "linked/bare")
			}
		})
	}
}

// harnessOps runs the harness at the ceiling and returns its acquires and releases per second.
func harnessOps(b *testing.B, lock, nem string) float64 {
	cfg := Config{
		Lock: lock, Nemesis: nem, Clients: ceilingClients, Keys: 1, Seed: 1, Store: b.TempDir(),
		TTL: Duration(2 * time.Second), TimeLimit: Duration(ceilingTime), Recovery: Duration(100 * time.Millisecond),
		ThinkMax: Duration(time.Microsecond), HoldMax: Duration(time.Microsecond),
	}
	out, err := Run(context.Background(), cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	st := out.Result.Stats
	if st.Duration <= 0 || st.Acquires.OK == 0 {
		b.Fatalf("%s under %s: no grants in %v", lock, nem, time.Duration(st.Duration))
	}
	return float64(st.Acquires.Total()+st.Releases.Total()) / time.Duration(st.Duration).Seconds()
}

// bareLoop starts the nodes a run of the lock would have and drives them with plain go-redis
// clients, one per client and node, as the locks configure theirs; it returns operations per second
// counted as the harness counts them (an acquire on every node is one, and so is the release of a
// lease granted by a majority).
func bareLoop(b *testing.B, nodes int) float64 {
	ctx := context.Background()
	sys, err := systems.Start(ctx, "redis-masters", systems.Config{Dir: b.TempDir(), Nodes: nodes, Direct: true})
	if err != nil {
		b.Fatal(err)
	}
	defer sys.Close()
	var ops atomic.Int64
	deadline := time.Now().Add(ceilingTime)
	var wg sync.WaitGroup
	for c := range ceilingClients {
		var clients []*redis.Client
		for _, n := range sys.Nodes() {
			cl := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, PoolSize: 2, DisableIdentity: true, Protocol: 2})
			defer cl.Close()
			clients = append(clients, cl)
		}
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				ops.Add(bareRound(ctx, clients, fmt.Sprintf("c%d-%s", c, strconv.Itoa(i))))
			}
		})
	}
	began := time.Now()
	wg.Wait()
	return float64(ops.Load()) / time.Since(began).Seconds()
}

var bareRelease = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

// bareRound is one acquire on every node at once, then a release on the nodes that granted it; it
// returns 2 when a majority granted it (an acquire and a release), else 1.
func bareRound(ctx context.Context, clients []*redis.Client, value string) int64 {
	granted := make([]bool, len(clients))
	if len(clients) == 1 {
		granted[0], _ = clients[0].SetNX(ctx, "k", value, 2*time.Second).Result()
	} else {
		var wg sync.WaitGroup
		for i, cl := range clients {
			wg.Go(func() { granted[i], _ = cl.SetNX(ctx, "k", value, 2*time.Second).Result() })
		}
		wg.Wait()
	}
	n := 0
	for i, cl := range clients {
		if granted[i] {
			n++
			bareRelease.Run(ctx, cl, []string{"k"}, value)
		}
	}
	if n > len(clients)/2 {
		return 2
	}
	return 1
}
