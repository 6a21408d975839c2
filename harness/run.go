package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/clusters"
	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/links"
	"github.com/lockpick-dev/lockpick/locks"
	"github.com/lockpick-dev/lockpick/nemesis"
	"github.com/lockpick-dev/lockpick/resource"
	"github.com/lockpick-dev/lockpick/results"
	"github.com/lockpick-dev/lockpick/systems"
	"github.com/lockpick-dev/lockpick/workloads"
)

// StartError is a run that could not start: bad input or a missing dependency. Nothing was run.
type StartError struct{ Err error }

func (e *StartError) Error() string { return e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// Outcome is a finished run.
type Outcome struct {
	Dir         string
	Result      *checker.Result
	Interrupted bool
	// Errors are problems of the run itself, beside the verdict (a fault that could not be applied).
	Errors []string
}

// Run performs one run. ctx cancelled (SIGINT) ends the run early: the nemesis heals, the processes
// finish their operations, and the history recorded so far is checked and stored. progress, if not
// nil, receives a live status line.
func Run(ctx context.Context, cfg Config, progress io.Writer) (*Outcome, error) {
	if err := cfg.Resolve(); err != nil {
		return nil, &StartError{err}
	}
	if _, err := clusters.FindRedisServer(cfg.RedisServer); err != nil {
		return nil, &StartError{err}
	}
	// The clock shim is loaded only when a nemesis moves clocks: other runs use the nodes unmodified,
	// so nothing of the shim (a system call per clock read) can colour their results.
	var shim string
	if cfg.NeedsClocks() {
		var err error
		if shim, err = clusters.FindClockShim(ctx, cfg.ClockShim, ""); err != nil {
			return nil, &StartError{fmt.Errorf("--nemesis clock: %w", err)}
		}
	}
	dir, err := results.NewRunDir(cfg.Store, cfg.Name, time.Now())
	if err != nil {
		return nil, &StartError{err}
	}
	logFile, err := os.Create(filepath.Join(dir, "lockpick.log"))
	if err != nil {
		return nil, &StartError{fmt.Errorf("create log: %w", err)}
	}
	defer logFile.Close()
	log := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if err := results.WriteJSON(dir, results.ConfigFile, cfg); err != nil {
		return nil, &StartError{err}
	}
	// The cluster: nodes, then one link per client group and node, then admin clients that bypass
	// the links for the harness's own use.
	cluster, err := clusters.StartLocal(ctx, clusters.Config{
		Nodes: cfg.Nodes, Dir: filepath.Join(dir, results.NodesDir), BasePort: cfg.BasePort,
		Persistence: clusters.Persistence(cfg.Persistence), RedisServer: cfg.RedisServer, Logger: log,
		ClockShim: shim,
	})
	if err != nil {
		return nil, &StartError{fmt.Errorf("start cluster: %w", err)}
	}
	defer cluster.Close()
	nodes := cluster.Nodes()
	names := make([]string, len(nodes))
	admin := make(map[string]*redis.Client, len(nodes))
	probeNodes := make([]systems.Node, len(nodes))
	own := systems.RedisNodes{}
	for i, n := range nodes {
		names[i] = n.Name
		admin[n.Name] = n.Admin()
		defer admin[n.Name].Close()
		probeNodes[i] = systems.Node{Name: n.Name, Role: systems.RoleMaster, Addr: n.Addr(), Data: true}
		own[n.Name] = n.Addr()
	}
	probe, err := locks.NewProbe(cfg.Lock, probeNodes)
	if err != nil {
		return nil, &StartError{err}
	}
	defer probe.Close()
	// The counter workload's resource: a node of its own, outside the lock's cluster, its links and
	// its faults; clients reach it directly.
	var store *resource.Store
	var resNode *clusters.Node
	if cfg.Workload == "counter" {
		res, err := clusters.StartLocal(ctx, clusters.Config{
			Nodes: 1, NamePrefix: "r", Dir: filepath.Join(dir, results.NodesDir),
			Persistence: clusters.PersistNone, RedisServer: cfg.RedisServer, Logger: log,
		})
		if err != nil {
			return nil, &StartError{fmt.Errorf("start resource node: %w", err)}
		}
		defer res.Close()
		resNode = res.Nodes()[0]
		store, err = resource.Open(resNode.Addr(), resource.Guard(cfg.Guard), cfg.Clients)
		if err != nil {
			return nil, &StartError{err}
		}
		defer store.Close()
	}
	linkSet := links.New()
	defer linkSet.Close()
	groups := cfg.GroupNames()
	for g := range groups {
		for _, n := range nodes {
			if _, err := linkSet.Add(groups[g], n.Name, n.Addr()); err != nil {
				return nil, &StartError{err}
			}
		}
	}

	nemEnv := cfg.nemesisEnv(&nemesis.Env{Links: linkSet, Probe: probe, Writes: own, Log: log})
	nemEnv.Cluster = cluster
	var pauses *workloads.Pauses
	if store != nil {
		pauses = workloads.NewPauses()
		nemEnv.Clients = pauses
	}
	if clocks, ok := any(cluster).(nemesis.Clocks); ok && cluster.ClockShim() {
		nemEnv.Clocks = clocks
	}
	var nems []nemesis.Nemesis
	var schedule []Schedule
	for _, spec := range cfg.Specs() {
		n, err := nemesis.Build(spec, nemEnv)
		if err != nil {
			return nil, &StartError{fmt.Errorf("--nemesis: %w", err)}
		}
		plan := n.Plan(nemesis.Seed(cfg.Seed, spec.Name), time.Duration(cfg.TimeLimit))
		nems = append(nems, n)
		schedule = append(schedule, Schedule{Nemesis: spec.String(), Ops: plan})
	}
	if err := results.WriteJSON(dir, results.ScheduleFile, schedule); err != nil {
		return nil, &StartError{err}
	}

	// store/latest moves only to a run that started: a failed start leaves it on the last real run.
	if err := results.LinkLatest(cfg.Store, dir); err != nil {
		log.Warn("cannot link latest", "err", err)
	}
	status := newStatus()
	start := time.Now()
	rec, err := history.Create(filepath.Join(dir, history.FileName), start, status.observe)
	if err != nil {
		return nil, &StartError{err}
	}
	log.Info("run started", "dir", dir, "lock", cfg.Lock, "nemesis", cfg.Nemesis, "seed", cfg.Seed, "nodes", cfg.Nodes)
	if shim != "" {
		log.Info("nodes run with the clock shim", "shim", shim)
	}

	lockOpts := locks.Options{NodeTimeout: time.Duration(cfg.NodeTimeout)}
	env := workloads.Env{
		Recorder: rec,
		NewLocker: func(process int) (locks.Locker, error) {
			group := groups[(process%cfg.Clients)%len(groups)]
			eps := make([]locks.Endpoint, len(names))
			for i, n := range names {
				l, err := linkSet.Get(group, n)
				if err != nil {
					return nil, err
				}
				eps[i] = locks.Endpoint{Node: n, Addr: l.Addr}
			}
			return locks.New(cfg.Lock, eps, lockOpts)
		},
	}
	var workload interface {
		Run(context.Context, workloads.Env) error
	} = workloads.Mutex{
		Clients: cfg.Clients, Keys: cfg.Keys, TTL: time.Duration(cfg.TTL),
		HoldMax: time.Duration(cfg.HoldMax), Seed: cfg.Seed,
	}
	if store != nil {
		workload = workloads.Counter{
			Clients: cfg.Clients, Keys: cfg.Keys, TTL: time.Duration(cfg.TTL), Seed: cfg.Seed,
			Store: store, Pauses: pauses,
		}
	}

	// Phases: faults until the time limit, then the nemesis heals, then the processes go on without
	// faults for the recovery phase. An interrupt cuts every phase short but never skips the heal.
	faultCtx, cancelFaults := context.WithDeadline(ctx, start.Add(time.Duration(cfg.TimeLimit)))
	defer cancelFaults()
	workCtx, cancelWork := context.WithDeadline(ctx, start.Add(time.Duration(cfg.TimeLimit+cfg.Recovery)))
	defer cancelWork()

	var wg sync.WaitGroup
	var workErr error
	nemErrs := make([]error, len(nems))
	for i, n := range nems {
		// Each nemesis follows its own schedule; all of them heal before the recovery phase.
		wg.Go(func() { nemErrs[i] = nemesis.Run(faultCtx, n, schedule[i].Ops, rec) })
	}
	wg.Go(func() { workErr = workload.Run(workCtx, env) })
	stopProgress := status.show(progress, start, time.Duration(cfg.TimeLimit+cfg.Recovery))
	wg.Wait()
	stopProgress()
	if resNode != nil {
		// The final value of every counter goes into the history, so the check needs nothing else.
		recordFinal(ctx, rec, resNode, cfg.KeyNames())
	}
	if err := rec.Close(); err != nil {
		return nil, fmt.Errorf("run in %s crashed: %w", dir, err)
	}
	if workErr != nil {
		return nil, fmt.Errorf("run in %s crashed: workload: %w", dir, workErr)
	}
	out := &Outcome{Dir: dir, Interrupted: ctx.Err() != nil}
	if nemErr := errors.Join(nemErrs...); nemErr != nil {
		log.Error("nemesis", "err", nemErr)
		out.Errors = append(out.Errors, "nemesis: "+nemErr.Error())
	}
	// After the heal every node must answer; a node that does not is a broken run, said beside the verdict.
	for _, n := range names {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		if err := admin[n].Ping(pctx).Err(); err != nil {
			out.Errors = append(out.Errors, fmt.Sprintf("node %s not answering after the heal: %v", n, err))
		}
		cancel()
	}
	linkSet.Close()
	cluster.Close()
	log.Info("run finished; checking", "interrupted", out.Interrupted)

	res, err := Check(dir, time.Duration(cfg.CheckTimeout), results.RunInfo{Dir: dir, Interrupted: out.Interrupted, Errors: out.Errors})
	if err != nil {
		return nil, err
	}
	out.Result = res
	return out, nil
}

// Check reads the history stored in dir, checks it, and writes the results beside it.
func Check(dir string, timeout time.Duration, info results.RunInfo) (*checker.Result, error) {
	events, err := history.ReadFile(filepath.Join(dir, history.FileName))
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", dir, err)
	}
	res, err := checker.Check(events, checker.Options{Timeout: timeout})
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", dir, err)
	}
	info.Dir = dir
	if err := results.Write(dir, res, info); err != nil {
		return nil, err
	}
	return res, nil
}

// recordFinal reads each counter over the resource node's admin connection and records it as a
// final operation of the harness. A read that fails is recorded as fail: the checker then has no
// final value and says so.
func recordFinal(ctx context.Context, rec *history.Recorder, node *clusters.Node, keys []string) {
	admin := node.Admin()
	defer admin.Close()
	for _, k := range keys {
		rec.Record(history.Event{Type: history.Invoke, Process: history.HarnessProcess, F: history.FFinal, Key: k})
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		v, err := admin.HGet(rctx, k, "value").Int64()
		cancel()
		ev := history.Event{Type: history.OK, Process: history.HarnessProcess, F: history.FFinal, Key: k}
		switch {
		case errors.Is(err, redis.Nil):
			ev.Value = "0"
		case err != nil:
			ev.Type, ev.Error = history.Fail, err.Error()
		default:
			ev.Value = strconv.FormatInt(v, 10)
		}
		rec.Record(ev)
	}
}

// Schedule is one nemesis's plan, as schedule.json stores it.
type Schedule struct {
	Nemesis string       `json:"nemesis"`
	Ops     []nemesis.Op `json:"ops"`
}

// status follows the history as it is written, for the live progress line.
type status struct {
	ops        atomic.Int64
	okAcquires atomic.Int64
	monitor    *checker.Monitor

	mu    sync.Mutex
	fault map[string]string // node -> fault op in effect
}

func newStatus() *status { return &status{monitor: checker.NewMonitor(), fault: map[string]string{}} }

func (s *status) observe(e history.Event) {
	s.monitor.Observe(e)
	if e.IsNemesis() {
		if e.Type != history.Invoke {
			return
		}
		s.mu.Lock()
		for _, n := range e.Nodes {
			if e.Effect == history.EffectHeal {
				delete(s.fault, n)
			} else {
				s.fault[n] = e.F
			}
		}
		s.mu.Unlock()
		return
	}
	if e.IsCompletion() {
		s.ops.Add(1)
		if e.F == history.FAcquire && e.Type == history.OK {
			s.okAcquires.Add(1)
		}
	}
}

func (s *status) faults() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.fault) == 0 {
		return "none"
	}
	byOp := map[string][]string{}
	for n, f := range s.fault {
		byOp[f] = append(byOp[f], n)
	}
	var parts []string
	for f, ns := range byOp {
		parts = append(parts, f+" "+strings.Join(sortedCopy(ns), ","))
	}
	return strings.Join(sortedCopy(parts), "; ")
}

// show prints the progress line every half second until the returned stop is called.
func (s *status) show(w io.Writer, start time.Time, total time.Duration) (stop func()) {
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(w, "\r\033[K")
				return
			case <-t.C:
				fmt.Fprintf(w, "\r\033[K%5.1fs/%v  ops %d  ok acquires %d  violations %d  fault: %s",
					time.Since(start).Seconds(), total, s.ops.Load(), s.okAcquires.Load(), s.monitor.Violations(), s.faults())
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
