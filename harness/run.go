package harness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/containers"
	"github.com/lockpick-dev/lockpick/history"
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
	// Stopped says how much of its plan a run cut short had run ("interrupted at 12.3s of 35s");
	// empty when the whole plan ran.
	Stopped string
	// StoppedEarly says when a run with StopAtFirst ended its fault phase at its first violation;
	// empty when it ran its whole fault phase.
	StoppedEarly string
	// Errors are problems of the run itself (a fault that could not be applied), beside the verdict.
	Errors []string
	// Warnings are signs the run measured the harness more than the lock (an overloaded machine).
	Warnings []string
	// Notes are what the run did besides its plan (removing what a killed run left behind).
	Notes []string
	// Library is the library the run tested (Config.Library).
	Library *history.Library
	// checking is the check that read the history while the run wrote it (nil: check at the end).
	checking *results.Following
	// Unwritten are the run's files that could not be written once it had its verdict (a full
	// disk), each with the fix; the verdict stands. A run whose results.json is among them is not
	// linked as store/latest.
	Unwritten []string
}

// Run performs one run. ctx cancelled (SIGINT) ends the run early: the nemesis heals, the processes
// finish their operations, the run's completion is recorded as cut short, and the history recorded
// so far is checked and stored. A history write that fails (a full disk) stops the run the same way
// and returns an error: a history with a hole cannot be judged. progress, if not nil, receives a
// live status line. store/latest moves to the run only once it has a verdict.
func Run(ctx context.Context, cfg Config, progress io.Writer) (*Outcome, error) {
	return execute(ctx, cfg, progress, hooks{})
}

// RunAnnounced is Run that calls verdict with the outcome as soon as the history is checked, before
// any file is written from it: whatever then fails to be written (results.json, the summary, the
// report, on a disk that filled), the caller has said the verdict. Such failures are the outcome's
// Unwritten, not an error.
func RunAnnounced(ctx context.Context, cfg Config, progress io.Writer, verdict func(*Outcome)) (*Outcome, error) {
	return execute(ctx, cfg, progress, hooks{verdict: verdict})
}

// hooks let tests reach places a real run cannot be steered to, and a caller hear the verdict first.
type hooks struct {
	// historyPath replaces the run's history file (a test aims it at /dev/full).
	historyPath string
	// verdict is RunAnnounced's; beforeWrite runs after it (a test fills the disk there).
	verdict     func(*Outcome)
	beforeWrite func(dir string)
}

func execute(ctx context.Context, cfg Config, progress io.Writer, hk hooks) (*Outcome, error) {
	if err := cfg.Resolve(); err != nil {
		return nil, &StartError{err}
	}
	shim, err := findBinaries(ctx, &cfg)
	if err != nil {
		return nil, &StartError{err}
	}
	eng, cleaned, err := openBackend(ctx, cfg)
	if err != nil {
		return nil, &StartError{err}
	}
	if eng != nil {
		defer eng.Close()
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
	kind, err := cfg.kind()
	if err != nil {
		return nil, &StartError{err}
	}
	libs := newLibraries(kind, cmp.Or(cfg.Version, cfg.Revision))
	cfg.Library = libs.library() // a client program names itself once it runs
	if err := results.WriteJSON(dir, results.ConfigFile, cfg); err != nil {
		return nil, &StartError{err}
	}
	if cleaned != "" {
		log.Warn(cleaned)
	}
	sys, err := startSystem(ctx, cfg, dir, shim, eng, log)
	if err != nil {
		return nil, &StartError{err}
	}
	defer sys.close()
	sys.libs = libs
	nems, schedule, err := buildNemeses(cfg, sys, log)
	if err != nil {
		return nil, &StartError{err}
	}
	if err := results.WriteJSON(dir, results.ScheduleFile, schedule); err != nil {
		return nil, &StartError{err}
	}
	histPath := filepath.Join(dir, history.FileName)
	if hk.historyPath != "" {
		histPath = hk.historyPath
	}
	log.Info("run started", "dir", dir, "lock", cfg.Lock, "system", cfg.System, "nemesis", cfg.Nemesis, "seed", cfg.Seed)
	out, err := drive(ctx, cfg, sys, nems, schedule, dir, histPath, progress, log)
	if cfg.Library = libs.library(); cfg.Library != nil {
		if werr := results.WriteJSON(dir, results.ConfigFile, cfg); werr != nil {
			log.Warn("cannot record the library in config.json", "err", werr)
		}
	}
	if err != nil {
		log.Error("run failed", "err", err)
		return nil, fmt.Errorf("run in %s: %w", dir, err)
	}
	out.Dir, out.Library = dir, cfg.Library
	if cleaned != "" {
		out.Notes = append(out.Notes, cleaned)
	}
	out.Errors = append(out.Errors, sys.answering(ctx)...)
	// The system is stopped before the check, so the checker has the machine to itself.
	sys.close()
	log.Info("run finished; checking", "stopped", out.Stopped)
	if err := finish(out, cfg, hk, log); err != nil {
		return nil, err
	}
	return out, nil
}

// finish checks the run, says its verdict (hk.verdict), and only then writes results.json and the
// files derived from it: a failure to write is one of out.Unwritten with its fix, never an error
// that would hide the verdict. store/latest moves to the run once results.json is written.
func finish(out *Outcome, cfg Config, hk hooks, log *slog.Logger) error {
	var c *results.Checked
	var err error
	if out.checking != nil {
		c, err = out.checking.Finish()
	} else {
		c, err = results.CheckRun(out.Dir, checkOptions(cfg))
	}
	if err != nil {
		return fmt.Errorf("check %s: %w", out.Dir, err)
	}
	out.Result = c.Result
	if hk.verdict != nil {
		hk.verdict(out)
	}
	if hk.beforeWrite != nil {
		hk.beforeWrite(out.Dir)
	}
	info := results.RunInfo{Dir: out.Dir, Interrupted: out.Interrupted, Stopped: out.Stopped, Errors: out.Errors, Warnings: out.Warnings, Library: out.Library}
	unwritten := func(err error) {
		log.Error("cannot write the run's results", "err", err)
		out.Unwritten = append(out.Unwritten, fmt.Sprintf("%v: %s", err, results.WriteFix(err)))
	}
	if err := c.WriteRecord(info); err != nil {
		unwritten(err)
	} else if err := results.LinkLatest(cfg.Store, out.Dir); err != nil {
		log.Warn("cannot link latest", "err", err)
	}
	for _, err := range c.WriteDerived(info) {
		unwritten(err)
	}
	return nil
}

// checkOptions are the checker's options of a run.
func checkOptions(cfg Config) checker.Options {
	return checker.Options{Timeout: time.Duration(cfg.CheckTimeout)}
}

// findBinaries checks that the servers' programs are there (redis-server for Redis systems and the
// counter's resource; etcd, recording its version, for the etcd system) and finds the clock shim when
// a nemesis needs it. Only runs that move clocks load the shim: other runs use the nodes unmodified,
// so nothing of it (a system call per clock read) can colour their results.
func findBinaries(ctx context.Context, cfg *Config) (shim string, err error) {
	server := cfg.traits().Server
	onHosts := cfg.Backend == systems.BackendExternal || cfg.Backend == systems.BackendSSH // the servers are not this host's
	if (server == "redis-server" && !onHosts) || cfg.Workload == "counter" {
		if _, err := systems.FindRedisServer(cfg.RedisServer); err != nil {
			return "", err
		}
	}
	if server == "etcd-server" && !onHosts {
		srv, err := systems.FindEtcd(ctx, cfg.EtcdServer, nil)
		if err != nil {
			return "", err
		}
		cfg.Etcd = &srv
	}
	f, moves := cfg.faultNeeding(nemesis.NodeClocks)
	if !moves {
		return "", nil
	}
	if shim, err = systems.FindClockShim(ctx, cfg.ClockShim, ""); err != nil {
		return "", fmt.Errorf("--nemesis %s: %w", f.Name(), err)
	}
	return shim, nil
}

// buildNemeses builds each nemesis over the running system and draws its schedule from the seed.
func buildNemeses(cfg Config, sys *system, log *slog.Logger) ([]nemesis.Nemesis, []Schedule, error) {
	backend := sys.sut.Backend()
	env := cfg.nemesisEnv(&nemesis.Env{Cluster: backend, Links: sys.sut.Links(), Roles: sys.sut, Probe: sys.probe, Holders: sys.holders, Writes: sys.sut, Log: log})
	if s, ok := sys.sut.(systems.SessionEnder); ok {
		env.Sessions = s
	}
	if p, ok := sys.sut.(systems.Promoter); ok {
		env.Promoter = p
	}
	// The nodes the system runs: the configured layout's, or what external sentinels reported.
	env.Nodes = nil
	for _, n := range sys.sut.Nodes() {
		if n.Data {
			env.Nodes = append(env.Nodes, n.Name)
		}
	}
	if sys.faults != nil {
		env.Clients, env.Crashes, env.ClientClocks = sys.faults.Pauses, sys.faults, sys.faults
	}
	if backend.ClockShim() {
		env.Clocks = backend
	}
	if m, ok := backend.(systems.HostClockMover); ok {
		if hc := m.HostClocks(); hc != nil {
			env.HostClocks = hc
		}
	}
	if nc, ok := backend.(nemesis.NetCutter); ok {
		env.Net = nc
	}
	if pc, ok := backend.(systems.PeerCutter); ok {
		env.Peers = pc
	}
	if ps, ok := backend.(systems.PeerSlower); ok {
		env.Slow = ps
	}
	var nems []nemesis.Nemesis
	var schedule []Schedule
	for _, f := range cfg.faults {
		n, err := f.Build(env)
		if err != nil {
			return nil, nil, fmt.Errorf("--nemesis: %w", err)
		}
		plan := n.Plan(nemesis.Seed(cfg.Seed, f.Name()), time.Duration(cfg.TimeLimit))
		nems = append(nems, n)
		schedule = append(schedule, Schedule{Nemesis: f.String(), Ops: plan})
	}
	return nems, schedule, nil
}

// warm is a workload started but held at its gate: its clients are open (or it has already ended,
// failed) and none has begun to work.
type warm struct {
	since  time.Time
	failed bool
	gate   chan struct{}
	once   sync.Once
}

// begin opens the gate: the workload's processes start their work.
func (w *warm) begin() { w.once.Do(func() { close(w.gate) }) }

// warmUp starts run (the workload) on wg and returns once its clients are all open, it has ended,
// or ctx is done. The workload waits at the gate (env.Ready) until begin.
func warmUp(wg *sync.WaitGroup, ctx context.Context, run func(workloads.Env) error, env workloads.Env) *warm {
	w := &warm{since: time.Now(), gate: make(chan struct{})}
	ready, ended := make(chan struct{}), make(chan struct{})
	env.Ready = func() {
		close(ready)
		<-w.gate
	}
	wg.Go(func() {
		defer close(ended)
		run(env)
	})
	select {
	case <-ready:
	case <-ended:
		w.failed = true
	case <-ctx.Done():
	}
	return w
}

// drive records the run: the run's invoke with its plan, the processes and nemeses through their
// phases, and the run's completion. Phases: faults until the time limit, then the nemeses heal,
// then the processes go on without faults for the recovery phase. An interrupt or a failed history
// write cuts every phase short but never skips the heal.
func drive(ctx context.Context, cfg Config, sys *system, nems []nemesis.Nemesis, schedule []Schedule, dir, histPath string, progress io.Writer, log *slog.Logger) (out *Outcome, err error) {
	st := newStatus()
	total := time.Duration(cfg.TimeLimit + cfg.Recovery)
	rec, err := history.Create(histPath, time.Now(), observer(st, sys.holders, len(nems) > 0))
	if err != nil {
		return nil, err
	}
	defer rec.Close()
	// The check reads the history as it is written, so the end of the run only finishes it: its
	// time and memory then do not grow with the run's length. It takes the events from the
	// recorder as they are written rather than decoding the file back (history.Tap).
	checking, ferr := results.FollowTap(dir, histPath, rec, checkOptions(cfg))
	if ferr != nil {
		log.Info("the history is checked once the run ends", "why", ferr)
	}
	defer func() {
		if err != nil && checking != nil {
			checking.Abandon()
		}
	}()

	// The run's own context ends at an interrupt or at the first failed history write; cutAt is when.
	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	go func() {
		select {
		case <-rec.Failed():
			cancelRun(rec.Err())
		case <-runCtx.Done():
		}
	}()
	workCtx, cancelWork := context.WithCancel(runCtx)
	defer cancelWork()
	var wg sync.WaitGroup
	var workErr error
	warm := warmUp(&wg, runCtx, func(env workloads.Env) error {
		workErr = cfg.workload(sys).Run(workCtx, env)
		return workErr
	}, sys.workloadEnv(cfg, rec))
	// The run's clock starts once every client is open: a client program that takes its time to
	// start (an interpreter loading its library on a loaded machine) must not eat the planned time,
	// or a run that worked for a fraction of it could still be called valid.
	start := time.Now()
	if err := rec.Restart(start); err != nil {
		cancelWork()
		warm.begin()
		wg.Wait()
		return nil, err
	}
	warmed := start.Sub(warm.since)
	if warmed > time.Second {
		log.Info("clients ready; the run's clock starts now", "after", warmed.Round(time.Millisecond))
	}
	sys.holders.begin(start)
	rec.Record(history.Event{Type: history.Invoke, Process: history.HarnessProcess, F: history.FRun, Plan: cfg.plan()})
	stopRoles := sys.recordRoles(rec, log)
	var cutAt atomic.Int64
	cutAt.Store(-1)
	cutTaken := make(chan struct{})
	unwatch := context.AfterFunc(runCtx, func() {
		cutAt.Store(int64(time.Since(start)))
		close(cutTaken)
	})

	faultCtx, cancelFaults := context.WithDeadline(runCtx, start.Add(time.Duration(cfg.TimeLimit)))
	defer cancelFaults()
	if warm.failed {
		cancelFaults() // the workload ended before it began: no fault has anything to hit
	}
	endWork := time.AfterFunc(time.Until(start.Add(total)), cancelWork)
	defer endWork.Stop()
	nemErrs := make([]error, len(nems))
	for i, n := range nems {
		// Each nemesis follows its own schedule; all of them heal before the recovery phase.
		wg.Go(func() { nemErrs[i] = nemesis.Run(faultCtx, n, schedule[i].Ops, nemesis.WithRoles(rec, sys.sut)) })
	}
	warm.begin()
	var earlyAt atomic.Int64
	earlyAt.Store(-1)
	if cfg.StopAtFirst {
		wg.Go(func() {
			stopAtFirst(faultCtx, st, start, time.Duration(cfg.Recovery), &earlyAt, cancelFaults, cancelWork)
		})
	}
	stopProgress := st.show(progress, start, total, time.Duration(cfg.NodeTimeout))
	wg.Wait()
	stopProgress()
	if !unwatch() {
		// The interrupt's callback runs in a goroutine of its own: wait for it, or a run cut short
		// could read no cut and say it ran whole.
		<-cutTaken
	}
	if sys.resNode != nil {
		// The final value of every counter goes into the history, so the check needs nothing else.
		recordFinal(ctx, rec, sys.resNode, cfg.KeyNames())
	}

	out = &Outcome{Interrupted: ctx.Err() != nil, checking: checking}
	if warmed > 5*time.Second {
		out.Notes = append(out.Notes, fmt.Sprintf("the clients took %v to start; the planned time counted from then", warmed.Round(100*time.Millisecond)))
	}
	if cut := time.Duration(cutAt.Load()); cut >= 0 && cut < total {
		out.Stopped = fmt.Sprintf("interrupted at %v of %v", cut.Round(100*time.Millisecond), total)
	}
	if at := time.Duration(earlyAt.Load()); at >= 0 {
		out.StoppedEarly = fmt.Sprintf("the fault phase ended at the first violation, %v into the run (of %v planned), then the faults healed and the recovery ran", at.Round(100*time.Millisecond), time.Duration(cfg.TimeLimit))
	}
	end := history.Event{Type: history.OK, Process: history.HarnessProcess, F: history.FRun}
	switch {
	case workErr != nil:
		end.Type, end.Error = history.Info, "workload failed: "+workErr.Error()
	case out.Stopped != "":
		end.Type, end.Error = history.Info, out.Stopped
	case out.StoppedEarly != "":
		// The plan did not run whole: should the full check find no violation after all, the run
		// lacks the evidence of its planned time and is unknown, never valid.
		end.Type, end.Error = history.Info, out.StoppedEarly
	}
	stopRoles()
	rec.Record(end)
	if err := rec.Close(); err != nil {
		at := time.Duration(max(cutAt.Load(), 0)).Round(100 * time.Millisecond)
		return nil, fmt.Errorf("stopped at %v of %v: %w: free space under the store or choose another --store", at, total, err)
	}
	if workErr != nil {
		return nil, fmt.Errorf("crashed: workload: %w", workErr)
	}
	if nemErr := errors.Join(nemErrs...); nemErr != nil {
		out.Errors = append(out.Errors, "nemesis: "+nemErr.Error())
	}
	if w := st.health.warning(time.Duration(cfg.NodeTimeout)); w != "" {
		out.Warnings = append(out.Warnings, w)
	}
	return out, nil
}

// observer is what sees each event as it is recorded: the status (progress line, overload, live
// monitor) and, in a run with nemeses, the holder view some of them aim by; a run without any
// follows no holders for nobody.
func observer(st *status, hold *holders, nemeses bool) func(*history.Event) {
	if !nemeses {
		return st.observe
	}
	return func(e *history.Event) {
		st.observe(e)
		hold.observe(e)
	}
}

// plan is what the run sets out to do, recorded on its invoke for the checker.
func (c *Config) plan() *history.Plan {
	p := &history.Plan{
		Lock: c.Lock, Workload: c.Workload, Keys: c.KeyNames(), Clients: c.Clients,
		TTL: int64(c.TTL), TimeLimit: int64(c.TimeLimit), Recovery: int64(c.Recovery), Seed: c.Seed,
		Expiry: int64(c.Expiry()), Scenario: c.Spelling.File,
	}
	for _, f := range c.faults {
		p.Nemeses = append(p.Nemeses, f.String())
	}
	if c.Workload == "mutex" {
		m := c.mutex()
		p.Hold, p.HoldMax, p.HoldMin, p.Careful, p.Extend = m.HoldName(), int64(m.HoldMax), int64(m.HoldMin), m.Careful, m.Extend
	}
	return p
}

// workload is the configured workload.
func (c *Config) workload(sys *system) interface {
	Run(context.Context, workloads.Env) error
} {
	if sys.store != nil {
		return workloads.Counter{
			Clients: c.Clients, Keys: c.Keys, TTL: time.Duration(c.TTL), Seed: c.Seed,
			ThinkMax: time.Duration(c.ThinkMax), Store: sys.store, Pauses: sys.faults.Pauses, Prefix: c.KeyPrefix,
			Extend: c.Extend,
		}
	}
	return c.mutex()
}

// mutex is the configured mutex workload.
func (c *Config) mutex() workloads.Mutex {
	return workloads.Mutex{
		Clients: c.Clients, Keys: c.Keys, TTL: time.Duration(c.TTL), Groups: c.ClientGroups,
		HoldMax: time.Duration(c.HoldMax), HoldMin: time.Duration(c.HoldMin), ThinkMax: time.Duration(c.ThinkMax), Seed: c.Seed,
		Careful: c.Careful, Extend: c.Extend, Expiry: c.Expiry(), Reentrant: c.Reentrant, Prefix: c.KeyPrefix,
	}
}

// stopAtFirst ends the fault phase once the live monitor (which counts exactly the overlaps the
// checker counts) has seen a violation: the nemeses heal, the recovery phase runs, and the whole
// history is checked as usual. at receives when it stopped.
func stopAtFirst(faultCtx context.Context, st *status, start time.Time, recovery time.Duration, at *atomic.Int64, cancelFaults, cancelWork context.CancelFunc) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	seen := 0
	for {
		select {
		case <-faultCtx.Done():
			return
		case <-tick.C:
		}
		// Two ticks in a row: a pair counted at the very instant of a hand-off can still be undone
		// by a release stamped at that same instant.
		if seen = seen + 1; st.monitor.Violations() == 0 {
			seen = 0
		}
		if seen >= 2 {
			at.Store(int64(time.Since(start)))
			cancelFaults()
			time.AfterFunc(recovery, cancelWork)
			return
		}
	}
}

// Check reads the history stored in dir, checks it, and writes the results beside it.
func Check(dir string, timeout time.Duration, info results.RunInfo) (*checker.Result, error) {
	// One pass over the history makes the verdict and everything the report shows.
	c, err := results.CheckRun(dir, checker.Options{Timeout: timeout})
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", dir, err)
	}
	info.Dir = dir
	if err := c.Write(info); err != nil {
		return nil, err
	}
	return c.Result, nil
}

// recordFinal reads each counter over the resource node's admin connection and records it as a
// final operation of the harness. A read that fails is recorded as fail: the checker then has no
// final value and says so.
func recordFinal(ctx context.Context, rec *history.Recorder, node *systems.LocalNode, keys []string) {
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

// system is what a run starts: the system under test (the lock's nodes with their roles, and a
// link on every path between them and the clients), the lock's lease probe, and for the counter
// workload its resource node. Nothing here knows which servers the system runs.
type system struct {
	sut     systems.System
	probe   locks.ProbeCloser
	groups  []string
	store   *resource.Store
	resNode *systems.LocalNode
	faults  *workloads.ClientFaults
	// holders follows who holds a lock now, for the nemeses that aim at the holder's group.
	holders *holders
	// clients is where client programs keep their logs; clientShim the clock shim they load.
	clients    string
	clientShim string
	// libs gathers the library each process's lock names.
	libs *libraries

	closers []func()
	once    sync.Once
}

// portTries is how many times a system is started on fresh ports when a node found its port taken.
const portTries = 3

// onFreshPorts calls start again, up to portTries times in all, while it fails because a node's port
// was taken between its reservation and its bind (by another run side by side, or any program):
// nothing was exercised yet, and a start on other ports is the same run.
// Before each new try, the nodes' directory of the failed one (dir, when given) is set aside as
// dir.taken-N, so the new nodes start on empty directories and the failed start's logs are kept.
func onFreshPorts(log *slog.Logger, what, dir string, start func() error) error {
	var err error
	for try := 1; try <= portTries; try++ {
		if err = start(); !errors.Is(err, systems.ErrPortTaken) || try == portTries {
			return err
		}
		log.Warn("a node's port was taken during start-up; starting again on fresh ports", "system", what, "try", try, "err", err)
		if dir != "" {
			if rerr := os.Rename(dir, fmt.Sprintf("%s.taken-%d", dir, try)); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				return fmt.Errorf("%w (and setting its nodes aside failed: %v)", err, rerr)
			}
		}
	}
	return err
}

// startSystem starts the system the lock needs, the lock's probe over its nodes, and the counter's
// resource. On error everything started is stopped again.
func startSystem(ctx context.Context, cfg Config, dir, shim string, eng *containers.Engine, log *slog.Logger) (_ *system, err error) {
	sys := &system{groups: cfg.GroupNames(), faults: workloads.NewClientFaults(cfg.Clients), clients: filepath.Join(dir, "clients")}
	sys.holders = newHolders(func(process int) string { return sys.groupOf(process, cfg.Clients) })
	defer func() {
		if err != nil {
			sys.close()
		}
	}()
	if sys.clientShim, err = cfg.clientShim(ctx); err != nil {
		return nil, err
	}
	nodesDir := filepath.Join(dir, results.NodesDir)
	scfg := cfg.systemConfig(nodesDir, shim, log)
	scfg.Docker = systems.DockerConfig{Engine: eng, Run: dir, PublishHost: cfg.DockerPublishHost}
	if scfg.SSH, err = cfg.sshConfig(dir); err != nil {
		return nil, err
	}
	err = onFreshPorts(log, cfg.System, nodesDir, func() (err error) {
		sys.sut, err = systems.Start(ctx, cfg.System, scfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", cfg.System, err)
	}
	sys.closers = append(sys.closers, func() { sys.sut.Close() })
	if sys.probe, err = locks.NewProbe(cfg.Lock, sys.sut.Nodes()); err != nil {
		return nil, err
	}
	sys.closers = append(sys.closers, func() { sys.probe.Close() })
	if cfg.Workload != "counter" {
		return sys, nil
	}
	// The counter workload's resource: a node of its own, outside the lock's system, its links and
	// its faults; clients reach it directly.
	var res *systems.Local
	err = onFreshPorts(log, "resource", "", func() (err error) {
		res, err = systems.StartLocal(ctx, systems.LocalConfig{
			Nodes: 1, NamePrefix: "r", Dir: nodesDir, Persistence: systems.PersistNone, RedisServer: cfg.RedisServer, Logger: log,
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("start resource node: %w", err)
	}
	sys.closers = append(sys.closers, func() { res.Close() })
	sys.resNode = res.Nodes()[0]
	if sys.store, err = resource.Open(sys.resNode.Addr(), resource.Guard(cfg.Guard), cfg.Clients); err != nil {
		return nil, err
	}
	sys.closers = append(sys.closers, func() { sys.store.Close() })
	return sys, nil
}

// close stops everything the system started, in reverse order; it is safe to call more than once.
func (s *system) close() {
	s.once.Do(func() {
		for i := len(s.closers) - 1; i >= 0; i-- {
			s.closers[i]()
		}
	})
}

// answering checks that every node answers after the heal, over its own address; one that does not
// is a broken run, said beside the verdict.
func (s *system) answering(ctx context.Context) []string {
	var errs []string
	for _, n := range s.sut.Nodes() {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		if err := s.sut.Ping(pctx, n.Name); err != nil {
			errs = append(errs, fmt.Sprintf("node %s not answering after the heal: %v", n.Name, err))
		}
		cancel()
	}
	return errs
}

// recordRoles records every change of roles the system announces, from now until the returned
// stop is called (before the run's completion: nothing may follow it), as an info event of the
// system's process. The note quotes the sentinels' latest +switch-master with the system's view.
func (s *system) recordRoles(rec *history.Recorder, log *slog.Logger) (stop func()) {
	var mu sync.Mutex
	stopped := false
	var announced string
	s.sut.Watch(func(e systems.Event) {
		log.Info("system event", "from", e.From, "kind", e.Kind, "text", e.Text)
		if e.Kind == "+switch-master" {
			announced = e.Kind + " from " + e.From + ": " + e.Text
		}
		if e.Kind != systems.KindRoles {
			return
		}
		ev := history.Event{Type: history.Info, Process: history.SystemProcess, F: history.FRole,
			Roles: map[string]string{}, Note: "roles: " + e.Text}
		for _, n := range slices.Sorted(maps.Keys(e.Roles)) {
			ev.Nodes = append(ev.Nodes, n)
			ev.Roles[n] = string(e.Roles[n])
		}
		if announced != "" {
			ev.Note, announced = announced+"; "+ev.Note, ""
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			rec.Record(ev)
		}
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
	}
}

// groupOf is the client group a process reaches the nodes through: a process keeps its client
// slot (process mod clients) across the fresh ids it gets after indeterminate results, and slots are
// dealt to the groups in turn.
func (s *system) groupOf(process, clients int) string {
	return s.groups[(process%clients)%len(s.groups)]
}

// workloadEnv gives each process a lock client whose endpoints are its client group's links.
func (s *system) workloadEnv(cfg Config, rec *history.Recorder) workloads.Env {
	return workloads.Env{
		Recorder: rec,
		Faults:   s.faults,
		NewLocker: func(process int) (locks.Locker, error) {
			slot := process % cfg.Clients
			eps, err := s.sut.Endpoints(s.groupOf(process, cfg.Clients))
			if err != nil {
				return nil, err
			}
			opts := locks.Options{
				NodeTimeout: time.Duration(cfg.NodeTimeout), WatchdogTimeout: cfg.Expiry(),
				Clock: s.faults.Clock(slot), Crash: s.faults.CrashHook(process), MasterName: cfg.MasterName,
				Process: process, TTL: time.Duration(cfg.TTL), KeyPrefix: cfg.KeyPrefix + workloads.KeyPrefix, ClientDir: s.clients,
				ClientCmd: cfg.ClientCmd, ClockShim: s.clientShim,
				ClientOptions: map[string]string{"node_timeout_ms": strconv.FormatInt(time.Duration(cfg.NodeTimeout).Milliseconds(), 10)},
			}
			kind, err := cfg.kind()
			if err != nil {
				return nil, err
			}
			l, err := locks.Build(kind, eps, opts)
			if err == nil && s.libs != nil {
				s.libs.opened(process, l)
			}
			return l, err
		},
	}
}
