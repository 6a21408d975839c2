package checker

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/internal/proctable"
)

// ValidationError is a history that breaks an assumption the checker rests on. No verdict is given
// on such a history: a verdict on input the checker misreads would mean nothing. Line is the
// 1-based line of history.jsonl where the problem shows.
type ValidationError struct {
	Line int
	Msg  string
}

func (e *ValidationError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// runInfo is what validation learns about the run itself.
type runInfo struct {
	plan  *history.Plan
	start int // position of the run's invoke, -1 if the history has none (a hand-made history)
	end   int // position of the run's completion, -1 if it never completed (a killed run)
}

// validate is step 0 of Check: it checks the history's own assumptions before anything reads it,
// so that nothing the later steps would misread or skip passes silently. A history is valid when
//
//   - every event's type is invoke, ok, fail or info;
//   - indexes strictly increase and times never go back, over the file and within each process
//     (the Recorder stamps both under one lock, so anything else is a corrupt file or two histories
//     concatenated);
//   - client processes (0 and up) do acquire, release, extend, work, read and write, one at a time, each
//     completion following an invoke of the same operation; the nemesis (-1) may run several
//     operations at once, each invoke a fault or a heal and each completion matching an invoke of
//     the same operation (and effect, if it names one); the harness (-2) does run and final;
//   - the system (-3) announces role changes only, as info events whose roles name their nodes; a
//     nemesis event may name the roles its nodes had, with known roles only, and nothing else
//     carries roles or a note;
//   - there is one run: its invoke, if any, is the first event and carries a sane plan (no
//     negative durations, keys named once), nothing follows its completion, which is ok or info,
//     and every acquire names a key of the plan;
//   - leases are sane: an ok acquire's deadline (0 when the lock promised none) and validity are
//     not negative, and the deadline is not before the acquire was invoked (a lease that ended
//     before it was asked for cannot have been granted; one that ended while the request was in
//     flight can, and grants no hold); a failed acquire's reason is held, error or none; a failed
//     release's or extend's is lost, error or none; an ok extend names its lease and promises a
//     deadline (see extended);
//   - reentrancy depths add up (see depth.go).
//
// A violation is a *ValidationError naming the line.
func validate(l *history.Log) (runInfo, error) {
	v := newValidator(sliceStore(l))
	for i := range l.Events {
		if err := v.event(i); err != nil {
			return v.run, err
		}
	}
	return v.run, nil
}

// newValidator returns a validator of the events of st; event(i) checks event i, in order.
func newValidator(st *store) *validator {
	return &validator{
		st:    st,
		run:   runInfo{start: -1, end: -1},
		final: -1,
	}
}

// lastEvent is a process's latest event: where it is and when it happened.
type lastEvent struct {
	pos  int
	time int64
}

type validator struct {
	st       *store
	run      runInfo
	keys     map[string]bool            // the plan's keys, nil without a plan that names them
	lastOf   proctable.Table[lastEvent] // process -> its latest event
	inflight proctable.Table[int]       // client process -> position of its in-flight invoke
	nemesis  []int                      // positions of nemesis invokes not yet completed, oldest first
	final    int                        // position of the harness's in-flight final read, -1 if none
	depths   map[depthKey]*depthState
}

func (v *validator) fail(i int, format string, args ...any) error {
	return &ValidationError{Line: v.st.line(i), Msg: fmt.Sprintf(format, args...)}
}

func (v *validator) line(i int) int { return v.st.line(i) }

func (v *validator) event(i int) error {
	e := v.st.at(i)
	switch e.Type {
	case history.Invoke, history.OK, history.Fail, history.Info:
	default:
		return v.fail(i, "unknown event type %q: an event is invoke, ok, fail or info", e.Type)
	}
	if err := v.order(i); err != nil {
		return err
	}
	if err := v.reason(i); err != nil {
		return err
	}
	var err error
	switch {
	case e.Process >= 0:
		err = v.client(i)
	case e.Process == history.NemesisProcess:
		err = v.nemesisEvent(i)
	case e.Process == history.HarnessProcess:
		err = v.harness(i)
	case e.Process == history.SystemProcess:
		err = v.system(i)
	default:
		err = v.fail(i, "unknown process %d: clients are numbered from 0, the nemesis is %d, the harness %d and the system %d",
			e.Process, history.NemesisProcess, history.HarnessProcess, history.SystemProcess)
	}
	if err == nil {
		err = v.roles(i)
	}
	v.lastOf.Put(e.Process, lastEvent{i, e.Time})
	return err
}

// order checks that the event comes after the previous one: one run, increasing indexes, time that
// never goes back.
func (v *validator) order(i int) error {
	e := v.st.at(i)
	if v.run.end >= 0 {
		return v.fail(i, "an event after the run ended on line %d: a history holds one run (two histories concatenated?)", v.line(v.run.end))
	}
	if e.Process == history.HarnessProcess && e.F == history.FRun && e.Type == history.Invoke && v.run.start >= 0 {
		return v.fail(i, "a second run begins (the first began on line %d): a history holds one run (two histories concatenated?)", v.line(v.run.start))
	}
	if i == 0 {
		return nil
	}
	p := v.st.at(i - 1)
	switch {
	case e.Index == p.Index:
		return v.fail(i, "index %d repeats that of line %d: indexes must strictly increase", e.Index, v.line(i-1))
	case e.Index < p.Index:
		return v.fail(i, "index %d goes back from %d on line %d: indexes must strictly increase (two histories concatenated?)", e.Index, p.Index, v.line(i-1))
	}
	if e.Time >= p.Time {
		return nil
	}
	if j, ok := v.lastOf.Get(e.Process); ok && e.Time < j.time {
		return v.fail(i, "process %d's event at %s is before its previous event at %s on line %d: a process's events must be in time order",
			e.Process, span(e.Time), span(j.time), v.line(j.pos))
	}
	return v.fail(i, "time %s goes back from %s on line %d: a history is in time order (two histories concatenated?)", span(e.Time), span(p.Time), v.line(i-1))
}

// isClientOp reports whether f is an operation of a client process.
func isClientOp(f string) bool {
	switch f {
	case history.FAcquire, history.FRelease, history.FExtend, history.FWork, history.FRead, history.FWrite:
		return true
	}
	return false
}

func (v *validator) client(i int) error {
	e := v.st.at(i)
	if e.F == history.FRenewed || e.F == history.FLost {
		return v.leaseNews(i)
	}
	if e.Depth < 0 || e.Depth > 0 && e.F != history.FAcquire && e.F != history.FRelease {
		return v.fail(i, "process %d's %s carries depth %d: a depth (the reentrancy count, 1 or more) belongs on an acquire or release", e.Process, e.F, e.Depth)
	}
	if !isClientOp(e.F) {
		return v.fail(i, "process %d: unknown operation %q: client operations are acquire, release, extend, work, read and write", e.Process, e.F)
	}
	if e.Type == history.Invoke {
		if j, busy := v.inflight.Get(e.Process); busy {
			return v.fail(i, "process %d invoked %s while its %s of line %d was still in flight: a process does one operation at a time",
				e.Process, e.F, v.st.at(j).F, v.line(j))
		}
		v.inflight.Put(e.Process, i)
		if e.F == history.FAcquire && v.keys != nil && !v.keys[e.Key] {
			return v.fail(i, "process %d acquires key %q, which is not among the plan's keys %q", e.Process, e.Key, v.run.plan.Keys)
		}
		return v.depthInvoke(i)
	}
	j, ok := v.inflight.Get(e.Process)
	if !ok {
		return v.fail(i, "process %d completed %s (%s) with no operation in flight: a completion follows its invoke", e.Process, e.F, e.Type)
	}
	inv := v.st.at(j)
	if inv.F != e.F {
		return v.fail(i, "process %d completed %s but its operation in flight is the %s of line %d", e.Process, e.F, inv.F, v.line(j))
	}
	v.inflight.Delete(e.Process)
	if err := v.depthDone(i, j); err != nil {
		return err
	}
	switch e.F {
	case history.FAcquire:
		return v.acquired(i, j)
	case history.FExtend:
		return v.extended(i, j)
	}
	return nil
}

// leaseNews checks a renewed or lost event: news the lock gave by itself, with no invoke before it,
// that names the lease it is about.
func (v *validator) leaseNews(i int) error {
	e := v.st.at(i)
	switch {
	case e.Type != history.Info:
		return v.fail(i, "process %d's %s event is %s: the lock's own news about a lease is an info event with no invoke", e.Process, e.F, e.Type)
	case e.Key == "":
		return v.fail(i, "process %d's %s event names no key: it names the lease it is about (key and value)", e.Process, e.F)
	case e.Deadline < 0:
		return v.fail(i, "process %d's %s event has a negative deadline (%d)", e.Process, e.F, e.Deadline)
	case e.F == history.FLost && e.Deadline != 0:
		return v.fail(i, "process %d's lost event carries a deadline: a lost lease has none", e.Process)
	case e.Depth != 0:
		return v.fail(i, "process %d's %s event carries depth %d: a depth belongs on an ok acquire or a release", e.Process, e.F, e.Depth)
	}
	return nil
}

// acquired checks the completion i of the acquire invoked at j: one key, and a sane lease.
func (v *validator) acquired(i, j int) error {
	e, inv := v.st.at(i), v.st.at(j)
	if inv.Key != "" && e.Key != "" && inv.Key != e.Key {
		return v.fail(i, "process %d's acquire of key %q (line %d) completed for key %q", e.Process, inv.Key, v.line(j), e.Key)
	}
	if e.Type != history.OK {
		return nil
	}
	switch {
	case e.Deadline < 0:
		return v.fail(i, "process %d's lease has a negative deadline (%d): a deadline is a time on the run clock, or absent when the lock promised none", e.Process, e.Deadline)
	case e.Validity < 0:
		return v.fail(i, "process %d's lease has a negative validity (%s)", e.Process, span(e.Validity))
	case e.Deadline > 0 && e.Deadline < inv.Time:
		return v.fail(i, "process %d's lease ends at %s, before its acquire was invoked at %s on line %d: no lock grants a lease that ended before it was asked for",
			e.Process, span(e.Deadline), span(inv.Time), v.line(j))
	}
	return nil
}

func (v *validator) nemesisEvent(i int) error {
	e := v.st.at(i)
	if e.Type == history.Invoke {
		if e.Effect != history.EffectFault && e.Effect != history.EffectHeal {
			return v.fail(i, "nemesis operation %q has effect %q: every nemesis operation is a %q or a %q", e.F, e.Effect, history.EffectFault, history.EffectHeal)
		}
		v.nemesis = append(v.nemesis, i)
		return nil
	}
	k := matchNemesis(len(v.nemesis), func(k int) *history.Event { return v.st.at(v.nemesis[k]) }, e)
	if k < 0 {
		return v.fail(i, "the nemesis completed %q (%s) with no such operation in flight: a completion follows its invoke", e.F, e.Type)
	}
	inv := v.st.at(v.nemesis[k])
	if e.Effect != "" && e.Effect != inv.Effect {
		return v.fail(i, "the nemesis completed %q as a %s, but its invoke on line %d was a %s", e.F, e.Effect, v.line(v.nemesis[k]), inv.Effect)
	}
	v.nemesis = slices.Delete(v.nemesis, k, k+1)
	return nil
}

func (v *validator) harness(i int) error {
	e := v.st.at(i)
	switch {
	case e.F == history.FRun && e.Type == history.Invoke:
		if i != 0 {
			return v.fail(i, "the run begins after other events: a run's invoke is the first event of its history")
		}
		v.run.start = i
		return v.plan(i)
	case e.F == history.FRun:
		if v.run.start < 0 {
			return v.fail(i, "the run completed, but no run began: a run's invoke is the first event of its history")
		}
		if e.Type == history.Fail {
			return v.fail(i, "the run completed with fail: a run ends ok (its plan ran) or info (it was cut short)")
		}
		v.run.end = i
	case e.F == history.FFinal && e.Type == history.Invoke:
		if v.final >= 0 {
			return v.fail(i, "a final read began while the final read of line %d was still in flight", v.line(v.final))
		}
		v.final = i
	case e.F == history.FFinal:
		if v.final < 0 {
			return v.fail(i, "a final read completed with none in flight: a completion follows its invoke")
		}
		v.final = -1
	default:
		return v.fail(i, "the harness (process %d): unknown operation %q: its operations are run and final", history.HarnessProcess, e.F)
	}
	return nil
}

// system checks an announcement of the system under test: a role change, one info event with the
// nodes whose role changed and their new roles, and nothing a client or the nemesis would carry.
func (v *validator) system(i int) error {
	e := v.st.at(i)
	switch {
	case e.F != history.FRole:
		return v.fail(i, "the system (process %d): unknown operation %q: it announces role changes (%q) only", history.SystemProcess, e.F, history.FRole)
	case e.Type != history.Info:
		return v.fail(i, "the system's role change is %s: it is an info event, with no invoke before it", e.Type)
	case len(e.Nodes) == 0 || len(e.Roles) != len(e.Nodes):
		return v.fail(i, "the system's role change names nodes %q with roles %v: every node whose role changed has its new role", e.Nodes, e.Roles)
	case e.Key != "" || e.Value != "" || e.Effect != "" || e.Fault != "" || e.Plan != nil:
		return v.fail(i, "the system's role change carries a key, value, effect, fault or plan: it names nodes, roles and a note only")
	}
	return nil
}

// knownRoles are the roles a node can have (systems.Role; the checker reads histories only).
var knownRoles = []string{"master", "primary", "replica", "sentinel", "leader", "follower", "fenced"}

// roles checks the roles and note an event may carry: roles name the event's own nodes, on nemesis
// events (the role each had then) and role changes; a note belongs to a role change (what the
// system announced) or a nemesis event (how the nemesis applied its fault).
func (v *validator) roles(i int) error {
	e := v.st.at(i)
	if e.Note != "" && e.Process != history.SystemProcess && e.Process != history.NemesisProcess {
		return v.fail(i, "process %d's event carries a note: only the system's role changes (process %d) and nemesis events (process %d) do", e.Process, history.SystemProcess, history.NemesisProcess)
	}
	if len(e.Roles) == 0 {
		return nil
	}
	if e.Process != history.NemesisProcess && e.Process != history.SystemProcess {
		return v.fail(i, "process %d's event carries roles: only nemesis events and the system's role changes do", e.Process)
	}
	for _, n := range slices.Sorted(maps.Keys(e.Roles)) {
		if !slices.Contains(e.Nodes, n) {
			return v.fail(i, "the event gives node %s a role but its nodes are %q: roles name the event's own nodes", n, e.Nodes)
		}
		if !slices.Contains(knownRoles, e.Roles[n]) {
			return v.fail(i, "node %s has unknown role %q: a role is one of %s", n, e.Roles[n], strings.Join(knownRoles, ", "))
		}
	}
	return nil
}

// plan checks the plan on the run's invoke i.
func (v *validator) plan(i int) error {
	p := v.st.at(i).Plan
	v.run.plan = p
	if p == nil {
		return nil // judged as a history without a plan; evidence says what that leaves out
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"ttl", p.TTL}, {"time_limit", p.TimeLimit}, {"recovery", p.Recovery}, {"clients", int64(p.Clients)}} {
		if f.v < 0 {
			return v.fail(i, "the plan's %s is negative (%d)", f.name, f.v)
		}
	}
	if len(p.Keys) == 0 {
		return nil
	}
	v.keys = make(map[string]bool, len(p.Keys))
	for _, k := range p.Keys {
		if k == "" || v.keys[k] {
			return v.fail(i, "the plan's keys %q name a key twice or an empty one", p.Keys)
		}
		v.keys[k] = true
	}
	return nil
}

// span renders a time or length on the run clock for an error message; unlike FormatTime it keeps
// the small values of hand-made histories readable ("5ns", "1.5s").
func span(ns int64) string { return time.Duration(ns).String() }
