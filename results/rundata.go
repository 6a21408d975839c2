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
)

// Ways a hold ended, as the report draws them.
const (
	endRelease byte = iota
	endExpiry
	endOpen // the history ended first
)

// acquire is one acquire operation, with the hold it gave when it completed ok.
type acquire struct {
	pid      int
	slot     int
	key      string
	value    string
	inv      int64
	comp     int64 // the history's end for a pending acquire
	outcome  byte
	holdEnd  int64 // ok only: the earlier of the release's invoke and the deadline
	endedBy  byte
	deadline int64
	nodes    []string
}

// write is one write of the counter workload's resource.
type write struct {
	pid, slot int
	key       string
	value     int64
	inv, comp int64
	accepted  bool
}

// offsetPoint is a node's clock offset from a clock nemesis event: set on the invoke, measured on
// the completion.
type offsetPoint struct {
	t        int64
	offset   int64
	measured bool
}

// runData is what the report and the plots draw, read once from the history.
type runData struct {
	meta     runMeta
	clients  int   // slots: a process id p runs in slot p mod clients (workloads/client.go)
	end      int64 // time of the last event
	acquires []acquire
	writes   []write
	offsets  map[string][]offsetPoint
	// nodes are the nodes named by fault windows and leases, in order of first appearance.
	nodes []string
	lost  []lostUpdate // see lostUpdates
}

// readRunData reads the run's configuration and history.
func readRunData(dir string, res *checker.Result) (*runData, error) {
	meta, err := readMeta(dir)
	if err != nil {
		return nil, err
	}
	d := &runData{meta: meta, clients: meta.Clients, offsets: map[string][]offsetPoint{}}
	if d.clients <= 0 {
		// Without a configured client count, one slot per process: a first pass finds how many.
		n := 0
		err = eachEvent(filepath.Join(dir, history.FileName), func(e *history.Event) { n = max(n, e.Process+1) })
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		d.clients = max(n, 1)
	}
	c := newCollector(d)
	if err := eachEvent(filepath.Join(dir, history.FileName), c.event); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	c.finish()
	d.nodes = nodesOf(d.acquires, res.Faults)
	return d, nil
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

// collector pairs invokes with completions, and ok acquires with the release that ends their hold,
// by the same rules as the checker (an earlier deadline ends the hold; a missing one never does).
type collector struct {
	d        *runData
	inflight map[int]int   // pid -> index into acquires of its open acquire
	open     map[int][]int // pid -> ok acquires whose hold has not ended
	writeInv map[int]int   // pid -> index into writes
	seenPlan bool
}

func newCollector(d *runData) *collector {
	return &collector{d: d, inflight: map[int]int{}, open: map[int][]int{}, writeInv: map[int]int{}}
}

func (c *collector) event(e *history.Event) {
	d := c.d
	d.end = max(d.end, e.Time)
	switch {
	case e.Plan != nil && !c.seenPlan:
		c.seenPlan = true
		d.meta.fillFromPlan(e.Plan)
	case e.Process == history.NemesisProcess:
		d.nemesisEvent(e)
	case e.Process < 0:
	case e.F == history.FAcquire:
		d.acquireEvent(e, c.inflight, c.open)
	case e.F == history.FRelease && e.Type == history.Invoke:
		d.endHold(e, c.open)
	case e.F == history.FWrite && e.Type == history.Invoke:
		v, _ := strconv.ParseInt(e.Value, 10, 64)
		c.writeInv[e.Process] = len(d.writes)
		d.writes = append(d.writes, write{pid: e.Process, slot: d.slotOf(e.Process), key: e.Key, value: v, inv: e.Time, comp: -1})
	case e.F == history.FWrite:
		if i, ok := c.writeInv[e.Process]; ok {
			delete(c.writeInv, e.Process)
			d.writes[i].comp, d.writes[i].accepted = e.Time, e.Type == history.OK
		}
	}
}

// finish closes what the history left open: pending acquires, and holds never released.
func (c *collector) finish() {
	d := c.d
	for _, i := range c.inflight {
		d.acquires[i].outcome, d.acquires[i].comp = outPending, d.end
	}
	for _, hs := range c.open {
		for _, i := range hs {
			a := &d.acquires[i]
			a.holdEnd, a.endedBy = min(a.deadline, d.end), endOpen
			if a.deadline <= d.end {
				a.endedBy = endExpiry
			}
		}
	}
}

func (d *runData) slotOf(pid int) int { return pid % d.clients }

func (d *runData) acquireEvent(e *history.Event, inflight map[int]int, open map[int][]int) {
	if e.Type == history.Invoke {
		inflight[e.Process] = len(d.acquires)
		d.acquires = append(d.acquires, acquire{pid: e.Process, slot: d.slotOf(e.Process), key: e.Key, inv: e.Time})
		return
	}
	i, ok := inflight[e.Process]
	if !ok {
		return // the checker reports a completion without an invoke
	}
	delete(inflight, e.Process)
	a := &d.acquires[i]
	a.comp = e.Time
	switch e.Type {
	case history.OK:
		a.outcome, a.value, a.nodes = outOK, e.Value, e.Nodes
		a.deadline = e.Deadline
		if a.deadline <= 0 {
			a.deadline = checker.Never
		}
		open[e.Process] = append(open[e.Process], i)
	case history.Fail:
		a.outcome = outFail
		if e.Reason == history.ReasonError {
			a.outcome = outError
		}
	default:
		a.outcome = outInfo
	}
}

// endHold ends the latest open hold of the process that the release names.
func (d *runData) endHold(e *history.Event, open map[int][]int) {
	hs := open[e.Process]
	for j := len(hs) - 1; j >= 0; j-- {
		a := &d.acquires[hs[j]]
		if (e.Key != "" && e.Key != a.key) || (e.Value != "" && a.value != "" && e.Value != a.value) {
			continue
		}
		a.holdEnd, a.endedBy = e.Time, endRelease
		if a.deadline < e.Time {
			a.holdEnd, a.endedBy = a.deadline, endExpiry
		}
		a.holdEnd = max(a.holdEnd, a.comp)
		open[e.Process] = append(hs[:j], hs[j+1:]...)
		return
	}
}

func (d *runData) nemesisEvent(e *history.Event) {
	for n, off := range e.Offsets {
		d.offsets[n] = append(d.offsets[n], offsetPoint{t: e.Time, offset: off, measured: e.Type != history.Invoke})
	}
}

// nodesOf lists the server nodes that granted leases or were hit by faults; client targets
// ("p3", of client-pause) are drawn on their slot's lane instead.
func nodesOf(acqs []acquire, faults []checker.FaultWindow) []string {
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
	for i := range acqs {
		for _, n := range acqs[i].nodes {
			add(n)
		}
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
