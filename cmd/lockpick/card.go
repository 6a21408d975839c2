package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockpick-dev/lockpick/harness"
	"github.com/lockpick-dev/lockpick/locks"
	"github.com/lockpick-dev/lockpick/results"
)

func newCardCmd() *cobra.Command {
	var cfg harness.Config
	var seedList, report, from string
	var only []string
	var parallel int
	var list, allSeeds bool
	var timeLimit time.Duration
	cmd := &cobra.Command{
		Use:   "card [LOCK]",
		Short: "Certify a lock: run one battery of lease-edge, fault and resource rows and judge the lock's promise",
		Long: `card certifies a lock: a shipped one (LOCK) or your own program (--client-cmd, which implies
--lock client). It derives one battery of rows from what the lock declares (its system and nodes,
a deadline or none, extend, fencing tokens, re-entry): lease-edge rows (holds to the deadline, a
slow client group, node timeouts, clock drift, client clocks, a sub-second TTL, extends, re-entry),
fault rows (restarts, partitions, node and client pauses, clock jumps, latency, client crashes, and
the system's own: Sentinel failover, etcd's leader) and resource rows (a counter unguarded, and
guarded). It runs each row once per seed, rows side by side; a row stops at its first violation,
and a row broken in one seed runs no more seeds (--all-seeds runs them: the card then shows in how
many seeds a row broke, and the median time to its first finding).

Each row is a verdict about the lock: kept its promise, broke it (with the first finding and its
time), or could not judge. The headline says SAFE under every row, or UNSAFE under the rows it
broke, with the remedies other rows of the card prove. card.md and card.json go to
store/card-LOCK/<timestamp> (card-PROGRAM after the program's last word for --client-cmd).

It exits 1 when the lock broke its promise in any lock row; else 255 on bad input or a run that
could not start; else 2 when a lock row could not judge; else 0 (it kept its promise in every lock
row). Rows where breaking is inherent to leases, and remedy rows, do not change the exit code.`,
		Example: `  lockpick card --client-cmd "python3 mylock.py" --client-capabilities extend
  lockpick card redsync
  lockpick card single --rows deadline,restart --seeds 1`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cardLock(&cfg, args); err != nil {
				return err
			}
			if cmd.Flags().Changed("time-limit") && timeLimit <= 0 {
				return fmt.Errorf("--time-limit %v: give a positive value, or leave --time-limit out for each row's own", timeLimit)
			}
			seeds, err := parseSeeds(seedList)
			if err != nil {
				return err
			}
			if parallel < 1 {
				return fmt.Errorf("--parallel must be at least 1, got %d", parallel)
			}
			store, err := filepath.Abs(cfg.Store)
			if err != nil {
				return fmt.Errorf("--store: %w", err)
			}
			cfg.Store, cfg.Command = store, cmdLine()
			stampConfig(&cfg)
			base := cardBase(cfg)
			rows, err := batteryFor(base)
			if err != nil {
				return err
			}
			if rows, err = onlyRows(rows, only); err != nil {
				return err
			}
			if list {
				listRows(cmd.OutOrStdout(), base, rows)
				return nil
			}
			if err := checkFrom(from, base, rows); err != nil {
				return err
			}
			c, err := newCardRun(cmd, base, rows, seeds, store, timeLimit)
			if err != nil {
				return err
			}
			c.report, c.allSeeds, c.card.AllSeeds = report, allSeeds, allSeeds
			if from != "" {
				err = c.fromStore(from)
			} else {
				err = c.runAll(parallel)
			}
			if err != nil {
				return err
			}
			return c.finish()
		},
	}
	f := cmd.Flags()
	optionFlags(f, "card", &cfg)
	seedsFlag(f, &seedList, "1,2,3", "run each row once per seed of this list")
	f.IntVar(&parallel, "parallel", 2, "runs at once (each has its own nodes and ports)")
	f.StringVar(&report, "report", "", "also write the card's markdown to this file (for example docs/cards/redsync.md)")
	f.StringVar(&from, "from", "", "run nothing: make the card of the runs already in this store (the latest run of each row and seed, checked again)")
	f.StringSliceVar(&only, "rows", nil, "run only these rows, by id (for example deadline,restart); the card lists the ids")
	f.BoolVar(&allSeeds, "all-seeds", false, "run a broken row's later seeds too, so the card shows in k of n seeds it broke and the median time to the first finding")
	f.BoolVar(&list, "list", false, "list the lock's rows (and why any is skipped) and run nothing")
	f.DurationVar(&timeLimit, "time-limit", 0, "fault phase of every row (default: each row's own, 8s to 40s)")
	return cmd
}

// checkFrom refuses a --from that holds no run of this card before anything is written: a card of
// runs that are not there would read as a card of failures.
func checkFrom(from string, base harness.Config, rows []cardRow) error {
	if from == "" {
		return nil
	}
	fi, err := os.Stat(from)
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("--from %s: not a directory: give the --store of an earlier card of %s (default store)", from, base.Lock)
	}
	for _, row := range rows {
		if row.skip != "" {
			continue
		}
		if fi, err := os.Stat(filepath.Join(from, row.config(base).Name)); err == nil && fi.IsDir() {
			return nil
		}
	}
	return fmt.Errorf("--from %s: holds no run of a row of this card: run `%s --store %s` first", from, cardCommand(base), from)
}

// cardCommand is the command that makes base's card.
func cardCommand(base harness.Config) string {
	if base.Lock == locks.ClientLock {
		return fmt.Sprintf("lockpick card --client-cmd '%s'", strings.Join(base.ClientCmd, " "))
	}
	return "lockpick card " + base.Lock
}

// cardLock sets the lock of a card: LOCK, or client when --client-cmd names a program.
func cardLock(cfg *harness.Config, args []string) error {
	switch {
	case len(args) == 1 && len(cfg.ClientCmd) > 0 && args[0] != locks.ClientLock:
		return fmt.Errorf("card %s --client-cmd: give a shipped LOCK or --client-cmd (your program), not both", args[0])
	case len(args) == 1:
		cfg.Lock = args[0]
	case len(cfg.ClientCmd) > 0:
		cfg.Lock = locks.ClientLock
	default:
		return fmt.Errorf("card needs a lock: name a shipped one (lockpick card redsync; one of %v) or give your program with --client-cmd 'PROGRAM ARGS'", locks.Names())
	}
	return locks.Validate(cfg.Lock)
}

// listRows prints the battery: each row's id, group, faults, or why it is skipped.
func listRows(w io.Writer, base harness.Config, rows []cardRow) {
	fmt.Fprintf(w, "card %s: %s\n", base.Lock, declares(base))
	for _, row := range rows {
		if row.skip != "" {
			fmt.Fprintf(w, "  %-20s %-8s skipped: %s\n", row.id, row.group, row.skip)
			continue
		}
		c := row.config(base)
		fmt.Fprintf(w, "  %-20s %-8s %s [%s; %s]\n", row.id, row.group, row.what, c.Nemesis, settings(c))
	}
}

// leftOut is why a row --rows did not name is on the card but did not run.
const leftOut = "left out by --rows"

// onlyRows runs only the rows --rows names; the others stay on the card as skipped (leftOut), so
// that its headline never calls a narrowed card safe under every row.
func onlyRows(rows []cardRow, only []string) ([]cardRow, error) {
	if len(only) == 0 {
		return rows, nil
	}
	var ids []string
	for _, r := range rows {
		ids = append(ids, r.id)
	}
	for _, id := range only {
		if !slices.Contains(ids, id) {
			return nil, fmt.Errorf("--rows: no row %q on this lock's card: use some of %s", id, strings.Join(ids, ","))
		}
	}
	out := slices.Clone(rows)
	for i := range out {
		if !slices.Contains(only, out[i].id) && out[i].skip == "" {
			out[i].skip = leftOut
		}
	}
	return out, nil
}

// declares says in words what the lock declares, for the card's header.
func declares(base harness.Config) string {
	k, err := cardKind(base)
	if err != nil {
		return "unknown"
	}
	r := base
	if err := r.Resolve(); err != nil {
		return "unknown"
	}
	parts := []string{fmt.Sprintf("system %s with %d data node(s)", r.System, len(r.NodeNames()))}
	yes := func(b bool, y, n string) {
		if b {
			parts = append(parts, y)
		} else {
			parts = append(parts, n)
		}
	}
	yes(k.Open, "leases with no deadline (held until release)", "leases with a deadline")
	yes(!k.NoExtend, "extends on request", "no extend")
	yes(k.Tokens, "fencing tokens", "no fencing tokens")
	yes(k.Reentrant, "reentrant", "not reentrant")
	return strings.Join(parts, ", ")
}

// settings says how a row's run differs from a plain run, for the card's JSON.
func settings(c harness.Config) string {
	s := []string{fmt.Sprintf("ttl %v", time.Duration(c.TTL)), fmt.Sprintf("%v + %v recovery", time.Duration(c.TimeLimit), time.Duration(c.Recovery))}
	add := func(b bool, text string) {
		if b {
			s = append(s, text)
		}
	}
	add(c.ClientGroups > 1, fmt.Sprintf("%d client groups", c.ClientGroups))
	add(c.NodeTimeout > 0, fmt.Sprintf("node timeout %v", time.Duration(c.NodeTimeout)))
	add(c.HoldMax > 0 && c.HoldMin == 0, fmt.Sprintf("holds up to %v", time.Duration(c.HoldMax)))
	add(c.HoldMin > 0, fmt.Sprintf("holds of %v to %v", time.Duration(c.HoldMin), time.Duration(c.HoldMax)))
	add(c.Extend, "extend")
	add(c.Reentrant, "reentrant")
	add(c.Workload == "counter", "counter, guard "+c.Guard)
	add(c.Persistence != "" && c.Persistence != "none", "persistence "+c.Persistence)
	return strings.Join(s, ", ")
}

// writeReport copies the card's markdown to --report.
func writeReport(path string, card *results.LibraryCard) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("--report %s: %w", path, err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--report %s: %w", path, err)
	}
	if err := card.Markdown(f); err != nil {
		f.Close()
		return fmt.Errorf("--report %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--report %s: %w", path, err)
	}
	return nil
}
