package harness

import (
	"context"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/systems"
	"github.com/lockpick-dev/lockpick/workloads"
)

// The ceiling: clients that never think and never hold, on one hot key, for ceilingTime; the bare
// loop and the harness take turns ceilingRounds times.
const (
	ceilingClients = 10
	ceilingTTL     = 2 * time.Second
	ceilingTime    = 3 * time.Second
	ceilingRounds  = 5
)

// BenchmarkCeiling measures operations per second at the ceiling: a bare go-redis loop (SET NX PX,
// then a compare-and-delete where it was granted), the harness with its clients reaching the nodes
// directly (no nemesis touches a link), and the harness with a link on every path (a latency
// nemesis that never fires). Both sides run the same clients on the same key for the same time on
// freshly started nodes, and count alike: acquires and releases completed over the span from the
// first request to the last reply. The machine is shared and its load drifts within seconds, so the
// three take turns, ceilingRounds times (the order alternating), and the benchmark reports the
// median of each and the median of the rounds' ratios. Run it with
// `go test ./harness -run '^$' -bench Ceiling -benchtime 1x`.
func BenchmarkCeiling(b *testing.B) {
	for _, c := range []struct {
		lock  string
		nodes int
	}{{"single", 1}, {"redlock", 5}} {
		b.Run(c.lock, func(b *testing.B) {
			for range b.N {
				var bare, direct, linked, directRatio, linkedRatio []float64
				var bareCPU, directCPU, linkedCPU []float64
				for round := range ceilingRounds {
					steps := []func(){
						func() {
							bare, bareCPU = measured(bare, bareCPU, func() (float64, int64, time.Duration) { return bareLoop(b, c.nodes) })
						},
						func() {
							direct, directCPU = measured(direct, directCPU, func() (float64, int64, time.Duration) { return harnessOps(b, c.lock, "none") })
						},
						func() {
							linked, linkedCPU = measured(linked, linkedCPU, func() (float64, int64, time.Duration) { return harnessOps(b, c.lock, "latency:interval=1h") })
						},
					}
					if round%2 == 1 {
						slices.Reverse(steps)
					}
					for _, step := range steps {
						step()
					}
					directRatio = append(directRatio, direct[round]/bare[round])
					linkedRatio = append(linkedRatio, linked[round]/bare[round])
				}
				b.ReportMetric(median(bare), "bare-ops/s")
				b.ReportMetric(median(direct), "harness-ops/s")
				b.ReportMetric(median(linked), "linked-ops/s")
				b.ReportMetric(median(directRatio), "harness/bare")
				b.ReportMetric(median(linkedRatio), "linked/bare")
				b.ReportMetric(median(bareCPU), "bare-cpu-us/op")
				b.ReportMetric(median(directCPU), "harness-cpu-us/op")
				b.ReportMetric(median(linkedCPU), "linked-cpu-us/op")
				b.Logf("%s, rounds' harness/bare %s, linked/bare %s", c.lock, ratios(directRatio), ratios(linkedRatio))
			}
		})
	}
}

// measured runs step, which returns its operations per second, its operations and its CPU, and appends
// those per second to rates and the CPU per operation, in microseconds, to cpus. Unlike the rate,
// CPU per operation hardly moves with the machine's load.
func measured(rates, cpus []float64, step func() (float64, int64, time.Duration)) ([]float64, []float64) {
	rate, ops, cpu := step()
	return append(rates, rate), append(cpus, float64(cpu.Microseconds())/float64(ops))
}

// startCPU collects the garbage the previous step left (a history read back, a checker's holds),
// which would otherwise be collected on this step's time, and returns cpuTime.
func startCPU() time.Duration {
	runtime.GC()
	return cpuTime()
}

// cpuTime is this process's user and system time: the clients', the harness's and the links', not
// the nodes' (the same commands on both sides; and a child's time is only counted once it has been
// reaped, which may be after the step that ran it). The harness's includes its run's fixed costs
// (starting, the end of the check, the report), a few percent of a run at the ceiling.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ratios(xs []float64) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = strconv.FormatFloat(x, 'f', 2, 64)
	}
	return "[" + strings.Join(out, " ") + "]"
}

// harnessOps runs the harness at the ceiling and returns its acquires and releases per second,
// counted from its history: completions of the clients' operations over the span from the first
// client's first request to the last reply.
func harnessOps(b *testing.B, lock, nem string) (float64, int64, time.Duration) {
	cfg := Config{
		Lock: lock, Nemesis: nem, Clients: ceilingClients, Keys: 1, Seed: 1, Store: b.TempDir(),
		TTL: Duration(ceilingTTL), TimeLimit: Duration(ceilingTime), Recovery: Duration(100 * time.Millisecond),
		ThinkMax: Duration(time.Microsecond), HoldMax: Duration(time.Microsecond),
	}
	cpu := startCPU()
	out, err := Run(context.Background(), cfg, nil)
	cpu = cpuTime() - cpu
	if err != nil {
		b.Fatal(err)
	}
	evs, err := history.ReadFile(filepath.Join(out.Dir, history.FileName))
	if err != nil {
		b.Fatal(err)
	}
	var ops, first, last int64 = 0, -1, 0
	for _, e := range evs {
		if e.Process < 0 || (e.F != history.FAcquire && e.F != history.FRelease) {
			continue
		}
		if first < 0 {
			first = e.Time
		}
		if e.IsCompletion() {
			ops++
			last = e.Time
		}
	}
	if ops == 0 || out.Result.Stats.Acquires.OK == 0 {
		b.Fatalf("%s under %s: no grants in %v", lock, nem, cfg.TimeLimit)
	}
	return float64(ops) / time.Duration(last-first).Seconds(), ops, cpu
}

// bareLoop starts the nodes a run of the lock would have and drives them with plain go-redis
// clients made as the locks make theirs, one per client and node, on the harness's key; it returns
// operations per second counted as the harness counts them (an acquire on every node is one, and so
// is the release of a lease granted by a majority) over the span from the first request to the last
// reply.
func bareLoop(b *testing.B, nodes int) (rate float64, ops int64, cpu time.Duration) {
	cpuBegan := startCPU()
	// After the nodes have stopped; set after the return statement, which would otherwise overwrite it.
	defer func() { cpu = cpuTime() - cpuBegan }()
	ctx := context.Background()
	sys, err := systems.Start(ctx, "redis-masters", systems.Config{Dir: b.TempDir(), Nodes: nodes, Direct: true})
	if err != nil {
		b.Fatal(err)
	}
	defer sys.Close()
	nodeTimeout := DefaultNodeTimeout(ceilingTTL)
	key := workloads.KeyName(0)
	var mu sync.Mutex
	var wg sync.WaitGroup
	began := time.Now()
	deadline := began.Add(ceilingTime)
	last := began
	for c := range ceilingClients {
		var clients []*redis.Client
		for _, n := range sys.Nodes() {
			cl := redis.NewClient(&redis.Options{
				Addr: n.Addr, MaxRetries: -1, DialTimeout: nodeTimeout, ReadTimeout: nodeTimeout, WriteTimeout: nodeTimeout,
				PoolTimeout: nodeTimeout, PoolSize: 2, DialerRetries: 1, ContextTimeoutEnabled: true, DisableIdentity: true, Protocol: 2,
			})
			defer cl.Close()
			clients = append(clients, cl)
		}
		wg.Go(func() {
			var n int64
			for i := 0; time.Now().Before(deadline); i++ {
				n += bareRound(ctx, clients, key, "c"+strconv.Itoa(c)+"-"+strconv.Itoa(i))
			}
			mu.Lock()
			defer mu.Unlock()
			ops += n
			if now := time.Now(); now.After(last) {
				last = now
			}
		})
	}
	wg.Wait()
	return float64(ops) / last.Sub(began).Seconds(), ops, 0
}

var bareRelease = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

// bareRound is one acquire on every node at once, then a release on the nodes that granted it; it
// returns 2 when a majority granted it (an acquire and a release), else 1.
func bareRound(ctx context.Context, clients []*redis.Client, key, value string) int64 {
	granted := make([]bool, len(clients))
	if len(clients) == 1 {
		granted[0], _ = clients[0].SetNX(ctx, key, value, ceilingTTL).Result()
	} else {
		var wg sync.WaitGroup
		for i, cl := range clients {
			wg.Go(func() { granted[i], _ = cl.SetNX(ctx, key, value, ceilingTTL).Result() })
		}
		wg.Wait()
	}
	n := 0
	for i, cl := range clients {
		if granted[i] {
			n++
			bareRelease.Run(ctx, cl, []string{key}, value)
		}
	}
	if n > len(clients)/2 {
		return 2
	}
	return 1
}
