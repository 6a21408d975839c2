package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
)

// runMeta is what the report says about a run besides its verdict: config.json, completed by the
// history's plan where config.json is missing or silent.
type runMeta struct {
	Name      string       `json:"name"`
	Lock      string       `json:"lock"`
	Workload  string       `json:"workload"`
	Nemesis   string       `json:"nemesis"`
	Guard     string       `json:"guard"`
	Nodes     int          `json:"nodes"`
	Clients   int          `json:"clients"`
	Keys      int          `json:"keys"`
	TTL       jsonDuration `json:"ttl"`
	TimeLimit jsonDuration `json:"time_limit"`
	Recovery  jsonDuration `json:"recovery"`
	Seed      uint64       `json:"seed"`
	Version   string       `json:"version"`
	Revision  string       `json:"revision"`
	Command   []string     `json:"command"`
	// Etcd is the etcd server of the etcd system: its program and version.
	Etcd *struct {
		Path    string `json:"path"`
		Version string `json:"version"`
	} `json:"etcd"`
	// Library is the library the run tested (harness.Config.Library).
	Library *history.Library `json:"library"`
	// Started is the run directory's timestamp.
	Started string `json:"-"`
}

// jsonDuration reads a duration written as "2s" (harness.Duration) or as nanoseconds.
type jsonDuration time.Duration

func (d *jsonDuration) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		v, err := time.ParseDuration(s)
		*d = jsonDuration(v)
		return err
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("duration: want \"2s\" or nanoseconds, got %s", b)
	}
	*d = jsonDuration(n)
	return nil
}

// readMeta reads dir/config.json; a run checked without one (lockpick check on a copied history)
// still gets a report from the plan.
func readMeta(dir string) (runMeta, error) {
	m := runMeta{Started: filepath.Base(dir)}
	b, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return m, fmt.Errorf("read %s: %w", ConfigFile, err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("read %s: %w", ConfigFile, err)
	}
	return m, nil
}

// fillFromPlan completes m with what the history's plan says and config.json did not.
func (m *runMeta) fillFromPlan(p *history.Plan) {
	if p == nil {
		return
	}
	set := func(dst *string, v string) {
		if *dst == "" {
			*dst = v
		}
	}
	set(&m.Lock, p.Lock)
	set(&m.Workload, p.Workload)
	set(&m.Nemesis, strings.Join(p.Nemeses, ","))
	if m.Clients == 0 {
		m.Clients = p.Clients
	}
	if m.Keys == 0 {
		m.Keys = len(p.Keys)
	}
	if m.TTL == 0 {
		m.TTL = jsonDuration(p.TTL)
	}
	if m.TimeLimit == 0 {
		m.TimeLimit, m.Recovery = jsonDuration(p.TimeLimit), jsonDuration(p.Recovery)
	}
	if m.Seed == 0 {
		m.Seed = p.Seed
	}
}

// Outcomes of an acquire as the report draws them.
const (
	outOK byte = iota
	outFail
	outError // a definite failure with reason "error": unreachable, no quorum
	outInfo
	outPending
	// outcomes is the number of outcomes of a completed acquire (those before outPending).
	outcomes = int(outPending)
)

// Ways a hold ended, as the report draws them.
const (
	endRelease byte = iota
	endExpiry
	endOpen // the history ended first
)

// write is one write of the counter workload's resource.
type write struct {
	pid, slot int
	key       string
	value     int64
	inv, comp int64
	accepted  bool
}

// okHold is an acquire that completed ok, with the hold it gave: kept, for the stale-write
// timelines, only in runs with a protected resource (see collector.keepHolds).
type okHold struct {
	pid       int
	key       string
	inv, comp int64
	holdEnd   int64
	nodes     []string
}

// offsetPoint is a node's clock offset from a clock nemesis event: set on the invoke, measured on
// the completion.
type offsetPoint struct {
	t        int64
	offset   int64
	measured bool
}

// runData is what the report and the plots draw, gathered in one pass over the history (the
// checker's own, see CheckRun): exact where it is drawn one by one (faults, clock offsets, writes,
// the timeline of a small run) and bounded otherwise (sampled latencies, rate and time bins), so its
// memory grows with the run's clients, nodes and length in time, not with its operations.
type runData struct {
	meta    runMeta
	clients int   // slots: a process id p runs in slot p mod clients (workloads/client.go)
	end     int64 // time of the last event
	writes  []write
	holds   []okHold
	offsets map[string][]offsetPoint
	// nodes are the nodes named by fault windows and leases, in order of first appearance.
	nodes []string
	tl    *tlBuilder
	lat   *latencyData
	rate  rateBins
	lost  []lostUpdate // see lostUpdates
}

// readRunData reads the run's configuration and its history, without checking it: the report of a
// result checked elsewhere (Write). CheckRun gathers the same in the checker's pass.
func readRunData(dir string, res *checker.Result) (*runData, error) {
	meta, err := readMeta(dir)
	if err != nil {
		return nil, err
	}
	c := newCollector(meta)
	if err := eachEvent(filepath.Join(dir, history.FileName), c.event); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	return c.finish(res), nil
}

// eachEvent streams a history file with the history's own scanner (the checker's fast decoder), one
// event at a time, so a report never holds the history; like history.Read it ignores a last line cut
// short by a crash. fn must not keep e itself (the next event overwrites it); its fields it may keep.
func eachEvent(path string, fn func(e *history.Event)) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open history: %w", err)
	}
	defer f.Close()
	s := history.NewScanner(f)
	for s.Scan() {
		fn(s.Event())
	}
	if err := s.Err(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// nodesOf lists the server nodes hit by faults, then those that granted leases; client targets
// ("p3", of client-pause) are drawn on their slot's lane instead.
func nodesOf(faults []checker.FaultWindow, leaseNodes []string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(n string) {
		if !seen[n] && !isClientTarget(n) {
			seen[n] = true
			out = append(out, n)
		}
	}
	for _, f := range faults {
		for _, n := range f.Nodes {
			add(n)
		}
	}
	for _, n := range leaseNodes {
		add(n)
	}
	return out
}

// isClientTarget reports whether a fault target names a client process ("p3") rather than a node.
func isClientTarget(n string) bool {
	_, ok := clientTarget(n)
	return ok
}

// clientTarget parses a client fault target "p3" into its process id.
func clientTarget(n string) (int, bool) {
	if len(n) < 2 || n[0] != 'p' {
		return 0, false
	}
	pid, err := strconv.Atoi(n[1:])
	return pid, err == nil && pid >= 0
}
