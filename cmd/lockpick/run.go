package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lockpick-dev/lockpick/harness"
	"github.com/lockpick-dev/lockpick/locks"
	"github.com/lockpick-dev/lockpick/nemesis"
	"github.com/lockpick-dev/lockpick/results"
	"github.com/lockpick-dev/lockpick/scenarios"
	"github.com/lockpick-dev/lockpick/systems"
)

func newRunCmd() *cobra.Command {
	var cfg harness.Config
	var ttl, timeLimit, recovery, interval, restartDelay, nodeTimeout, holdMax, thinkMax, checkTimeout, watchdogTimeout time.Duration
	var junit *string
	var seedList string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "run [SCENARIO.yaml]",
		Short: "Run a lock under nemeses and check the history",
		Long: `run starts a cluster, drives the clients through the lock while the nemeses inject faults,
and checks the history. It exits 0 valid, 1 invalid, 2 unknown, 255 when the run could not start.

Given a scenario file, run takes everything from the file (only --seed, --time-limit and --store
may change it) and exits 0 when the run showed what the file expects, 1 when it did not.`,
		Example: `  lockpick run --lock redlock --nemesis restart --time-limit 60s --seed 1
  lockpick run --lock redlock --nemesis partition:kind=client-minority,clock:target=majority
  lockpick run scenarios/redlock-restart.yaml --seed 3`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				return runFile(cmd, args[0])
			}
			if err := refuseZero(cmd.Flags(), "nodes", "replicas", "sentinels", "client-groups", "interval", "restart-delay", "node-timeout", "hold-max", "think-max", "check-timeout", "watchdog-timeout"); err != nil {
				return err
			}
			cfg.TTL, cfg.TimeLimit, cfg.Recovery = harness.Duration(ttl), harness.Duration(timeLimit), harness.Duration(recovery)
			cfg.Interval, cfg.RestartDelay, cfg.NodeTimeout = harness.Duration(interval), harness.Duration(restartDelay), harness.Duration(nodeTimeout)
			cfg.HoldMax, cfg.ThinkMax, cfg.CheckTimeout = harness.Duration(holdMax), harness.Duration(thinkMax), harness.Duration(checkTimeout)
			cfg.WatchdogTimeout = harness.Duration(watchdogTimeout)
			if !cmd.Flags().Changed("seed") {
				cfg.Seed = randomSeed()
			}
			cfg.Revision = revision
			cfg.Command = cmdLine()
			if dryRun {
				text, err := harness.DryRun(cfg)
				if err != nil {
					return err
				}
				fmt.Fprint(cmd.OutOrStdout(), text)
				return nil
			}
			if cmd.Flags().Changed("seeds") {
				return runSeeds(cmd, cfg, seedList, *junit)
			}
			return runOnce(cmd, cfg, *junit)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Lock, "lock", "redlock", fmt.Sprintf("lock under test: %v", locks.Names()))
	lockFlags(f, &cfg)
	f.StringVar(&cfg.Nemesis, "nemesis", "none", fmt.Sprintf("fault to inject: %v", nemesis.Names()))
	f.StringVar(&cfg.Workload, "workload", "mutex", "what the clients do: mutex (acquire, hold, release) or counter (read-modify-write of a counter on a separate resource node)")
	f.StringVar(&cfg.Guard, "guard", "", "how the counter's resource checks writes: none, fencing (needs --lock fenced) or check-and-set (default none)")
	f.StringVar(&cfg.Name, "name", "", "name of the run in the store (default LOCK-NEMESIS)")
	f.StringVar(&cfg.Persistence, "persistence", "none", "node persistence: none, aof-everysec, aof-always")
	f.IntVar(&cfg.Clients, "clients", 10, fmt.Sprintf("concurrent client processes (at most %d)", harness.MaxClients))
	f.IntVar(&cfg.ClientGroups, "client-groups", 1, "client groups, each with its own link to every node")
	f.IntVar(&cfg.Keys, "keys", 1, "lock keys the clients contend for")
	f.DurationVar(&ttl, "ttl", 2*time.Second, "lease TTL each acquire asks for")
	f.DurationVar(&timeLimit, "time-limit", 30*time.Second, "length of the fault phase")
	f.DurationVar(&recovery, "recovery", 5*time.Second, "fault-free phase after the final heal")
	f.DurationVar(&interval, "interval", 5*time.Second, "mean time between faults")
	f.DurationVar(&restartDelay, "restart-delay", 0, "how long restart-delayed keeps a node down (default 1.5 x TTL)")
	f.DurationVar(&nodeTimeout, "node-timeout", 0, "timeout of each lock request to one node (default TTL/4 within 50ms..2s); raise it when the run warns of overload")
	f.DurationVar(&holdMax, "hold-max", 0, "draw holds uniformly up to this, mutex workload (default: across each lease's validity, 60% in [0, v/2], 30% in [0.8v, v), 10% in [v, 1.2v)); past the validity a holder overruns, and the checker reports it")
	f.BoolVar(&cfg.Careful, "careful", false, "mutex holders check their remaining validity and never plan work past their deadline")
	f.BoolVar(&cfg.StopAtFirst, "stop-at-first", false, "end the fault phase at the first violation (then heal, recover and check the whole history); with a scenario file, only when the file expects violations and nothing else")
	f.BoolVar(&cfg.Reentrant, "reentrant", false, "mutex holders of a reentrant lock (watchdog, r2m) enter it again inside their hold; refused clients now and then unlock a key they do not hold, which the lock must refuse")
	f.DurationVar(&watchdogTimeout, "watchdog-timeout", 0, "lease time of watchdog locks (watchdog, r2m), renewed every third of it (default: --ttl)")
	f.BoolVar(&cfg.Extend, "extend", false, "mutex holders renew their leases (Extend) for work up to three validities long")
	f.DurationVar(&thinkMax, "think-max", 0, "longest pause of a client between its operations (default 20ms per client per key)")
	f.DurationVar(&checkTimeout, "check-timeout", 2*time.Minute, "time the checker may take before the verdict is unknown")
	f.Uint64Var(&cfg.Seed, "seed", 0, "seed of the fault schedule and the workload (default random, printed)")
	f.StringVar(&seedList, "seeds", "", "run once per seed of this comma-separated list (for example 1,2,3) and summarise the runs")
	f.StringVar(&cfg.Store, "store", "store", "directory of the run store")
	f.IntVar(&cfg.BasePort, "base-port", 0, "first port of the nodes (default: free ports)")
	junit = junitFlag(cmd, "run")
	f.StringVar(&cfg.Backend, "backend", "local", fmt.Sprintf("who runs the nodes: %v (docker: containers on a private bridge network; external: --endpoints someone else runs)", systems.Backends()))
	f.StringVar(&cfg.DockerHost, "docker-host", "", "Docker Engine of --backend docker (default: DOCKER_HOST, else the local socket)")
	f.StringVar(&cfg.DockerPublishHost, "docker-publish-host", "", dockerPublishUsage)
	f.StringSliceVar(&cfg.Endpoints, "endpoints", nil, "servers of --backend external, host:port[,host:port...]: redis masters someone else runs (one for single, fenced and watchdog locks, an odd number for redlock)")
	f.StringVar(&cfg.MasterName, "master-name", "", "with --backend external and a sentinel lock: the name the --endpoints (sentinels) monitor the primary under")
	f.BoolVar(&dryRun, "dry-run", false, "print what the run would do (nodes, keys, the faults' schedule, the clean-up) and exit without starting anything")
	return cmd
}

// lockFlags adds the flags that say which lock runs on what: the program of --lock client and what
// it offers, the system and its size, and the server programs. run and card share them.
func lockFlags(f *pflag.FlagSet, cfg *harness.Config) {
	f.Var(wordsValue{&cfg.ClientCmd}, "client-cmd", "the program of --lock client and its arguments, split at spaces (it speaks the client protocol: docs/protocol.md)")
	f.StringSliceVar(&cfg.ClientCaps, "client-capabilities", nil, fmt.Sprintf("what the program of --lock client offers, comma-separated: %v", locks.ClientCapabilities))
	f.StringVar(&cfg.System, "system", "", fmt.Sprintf("system the lock runs on: %v (default the one the lock needs)", systems.Names()))
	f.IntVar(&cfg.Nodes, "nodes", 0, "masters of redis-masters (default 5 for redlock, 1 for single and fenced; redlock takes an odd number of at least 3)")
	f.IntVar(&cfg.Replicas, "replicas", 0, "replicas of the primary on redis-sentinel (--lock sentinel, sentinel-wait; default 2)")
	f.IntVar(&cfg.Sentinels, "sentinels", 0, "sentinels of redis-sentinel, quorum a majority of them (default 3)")
	f.BoolVar(&cfg.AllowEvenNodes, "allow-even-nodes", false, "let redlock run on an even number of nodes")
	f.StringVar(&cfg.RedisServer, "redis-server", "", "redis-server binary (default: from PATH)")
	f.StringVar(&cfg.EtcdServer, "etcd-server", "", etcdServerUsage)
	f.StringVar(&cfg.ClockShim, "clock-shim", "", "clock shim library for the clock nemesis (default: libclockshim.so beside lockpick, else built from source with cc)")
}

// etcdServerUsage describes --etcd-server.
const etcdServerUsage = `etcd program of the etcd system: "system" (etcd on PATH, Debian's etcd-server), "current" (etcd ` + systems.EtcdCurrentVersion + ` built from the Go module proxy once and cached), or a path`

// runFile runs a scenario file; only flags that do not change what it tests may be given with it.
func runFile(cmd *cobra.Command, file string) error {
	var bad []string
	cmd.Flags().Visit(func(f *pflag.Flag) {
		switch f.Name {
		case "seed", "seeds", "time-limit", "store", "junit", "stop-at-first", "etcd-server", "backend", "docker-host", "docker-publish-host":
		default:
			bad = append(bad, "--"+f.Name)
		}
	})
	if len(bad) > 0 {
		return fmt.Errorf("%s cannot be combined with a scenario file: edit %s instead (only --seed, --seeds, --time-limit, --store, --junit, --stop-at-first, --etcd-server, --backend, --docker-host and --docker-publish-host apply)", strings.Join(bad, ", "), file)
	}
	s, err := scenarios.Load(file)
	if err != nil {
		return err
	}
	o := scenarioOverrides{}
	o.store, _ = cmd.Flags().GetString("store")
	o.etcdServer, _ = cmd.Flags().GetString("etcd-server")
	o.backend, _ = cmd.Flags().GetString("backend")
	o.dockerHost, _ = cmd.Flags().GetString("docker-host")
	o.dockerPublish, _ = cmd.Flags().GetString("docker-publish-host")
	junitPath, _ := cmd.Flags().GetString("junit")
	o.junit = newJUnit(junitPath, "lockpick run")
	if cmd.Flags().Changed("time-limit") {
		o.timeLimit, _ = cmd.Flags().GetDuration("time-limit")
	}
	if cmd.Flags().Changed("seed") {
		seed, _ := cmd.Flags().GetUint64("seed")
		o.seed = &seed
	}
	o.stopAtFirst, _ = cmd.Flags().GetBool("stop-at-first")
	if cmd.Flags().Changed("seeds") {
		return runFileSeeds(cmd, s, o)
	}
	met, err := runScenario(cmd, cmd.OutOrStdout(), progressWriter(), s, o)
	if jerr := o.junit.write(); jerr != nil && err == nil {
		err = jerr
	}
	if err != nil {
		return err
	}
	if !met {
		return exitError{1}
	}
	return nil
}

func cmdLine() []string { return os.Args }

// refuseZero refuses the named flags when given as zero. A zero in harness.Config means "the
// default", so without this --interval 0 would silently become 5s and --nodes 0 become 5.
func refuseZero(f *pflag.FlagSet, names ...string) error {
	for _, name := range names {
		fl := f.Lookup(name)
		if fl == nil || !fl.Changed {
			continue
		}
		if v := fl.Value.String(); v == "0" || v == "0s" {
			return fmt.Errorf("--%s %s: give a positive value, or leave --%s out for its default", name, v, name)
		}
	}
	return nil
}

// runOnce runs cfg and says its verdict the moment it is checked, before any file is written from
// it; files that then cannot be written (a full disk, --junit) are warnings, and the exit code is
// the verdict's.
func runOnce(cmd *cobra.Command, cfg harness.Config, junitPath string) error {
	w := cmd.OutOrStdout()
	j := newJUnit(junitPath, "lockpick run")
	began := time.Now()
	out, err := harness.RunAnnounced(cmd.Context(), cfg, progressWriter(), func(out *harness.Outcome) {
		fmt.Fprint(w, out.Result.Summary())
		printOutcome(w, out)
	})
	j.addRun(cfg, out, err, time.Since(began))
	jerr := j.write()
	if err != nil {
		return err
	}
	if jerr != nil {
		out.Unwritten = append(out.Unwritten, jerr.Error())
	}
	fmt.Fprintf(w, "seed %d; run stored in %s\n", cfg.Seed, out.Dir)
	if !printUnwritten(cmd.ErrOrStderr(), out.Unwritten) {
		fmt.Fprintf(w, "report: %s, %s, %s\n",
			filepath.Join(out.Dir, results.ReportFile), filepath.Join(out.Dir, results.SummaryFile), filepath.Join(out.Dir, results.ResultsFile))
	}
	return exitError{runExitCode(out)}
}

// printUnwritten warns of each file a run could not write after its verdict was said, and reports
// whether there was any.
func printUnwritten(w io.Writer, unwritten []string) bool {
	for _, u := range unwritten {
		fmt.Fprintf(w, "lockpick: warning: %s (the verdict above stands)\n", u)
	}
	return len(unwritten) > 0
}

// printOutcome says what the harness saw beside the verdict: the library the run tested, run
// errors, overload warnings, and how much of the plan a run cut short had run.
func printOutcome(w io.Writer, out *harness.Outcome) {
	if l := out.Library; l != nil {
		fmt.Fprintln(w, "library:", l.String())
		for _, n := range l.Notes {
			fmt.Fprintln(w, "library note:", n)
		}
	}
	for _, e := range out.Errors {
		fmt.Fprintln(w, "run error:", e)
	}
	for _, e := range out.Warnings {
		fmt.Fprintln(w, "warning:", e)
	}
	for _, e := range out.Notes {
		fmt.Fprintln(w, "note:", e)
	}
	for _, u := range out.Unwritten {
		fmt.Fprintf(w, "warning: %s (the verdict above stands)\n", u)
	}
	if out.StoppedEarly != "" {
		fmt.Fprintf(w, "stopped early (--stop-at-first): %s\n", out.StoppedEarly)
	}
	switch {
	case out.Stopped != "":
		fmt.Fprintf(w, "cut short: %s; the verdict covers only the history recorded until then, and a run cut short never passes as valid\n", out.Stopped)
	case out.Interrupted:
		fmt.Fprintln(w, "interrupted after the plan had run: the verdict covers the whole run")
	}
}

// runExitCode is the run's exit code. A run cut short proved nothing about the part of its plan it did
// not run, so it never exits 0 (valid): the checker calls it unknown, and this guard keeps that
// promise even for a checker that does not know the run's completion.
func runExitCode(out *harness.Outcome) int {
	code := out.Result.Valid.ExitCode()
	if out.Stopped != "" && code == 0 {
		return 2
	}
	return code
}

// randomSeed picks a seed for a run that was given none; it is printed and stored with the run.
func randomSeed() uint64 { return rand.Uint64() >> 1 }

// progressWriter is stderr when it is a terminal, for the live progress line; nil otherwise.
func progressWriter() io.Writer {
	if isTerminal(os.Stderr) {
		return os.Stderr
	}
	return nil
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// wordsValue is a flag whose text is split at spaces into words (a command and its arguments).
type wordsValue struct{ words *[]string }

func (w wordsValue) String() string {
	if w.words == nil {
		return ""
	}
	return strings.Join(*w.words, " ")
}

func (w wordsValue) Set(s string) error {
	*w.words = strings.Fields(s)
	return nil
}

func (w wordsValue) Type() string { return "command" }
