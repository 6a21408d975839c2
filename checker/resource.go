package checker

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/resource"
)

// ResourceResult is the data-level verdict of a counter-workload history: did the counter the lock
// protects come out right?
type ResourceResult struct {
	// Valid is the data-level verdict: the counter behaved as an atomic counter (porcupine) and no
	// increment was lost.
	Valid Verdict `json:"valid"`
	// Guard is the resource's guard, as the history's writes name it.
	Guard string `json:"guard"`
	// Porcupine is porcupine's verdict on the counter model: "ok", "illegal" or "unknown".
	Porcupine string `json:"porcupine"`
	Segments  int    `json:"segments"`
	// Reads, Writes count the resource operations; Writes split into accepted (ok), rejected by the
	// guard (fail) and unknown (info).
	Reads  Counts `json:"reads"`
	Writes Counts `json:"writes"`
	// Initial and Final are the counter values summed over keys; HasFinal is false when the history
	// has no final value for some key, and lost updates cannot be counted.
	Initial  int64 `json:"initial"`
	Final    int64 `json:"final"`
	HasFinal bool  `json:"has_final"`
	// LostUpdates is accepted writes minus the counter's increase: increments that were accepted and
	// then overwritten. Writes with unknown outcome could only add to it.
	LostUpdates int64 `json:"lost_updates"`
	// Phantom is how far the counters rose beyond every write that may have been accepted.
	Phantom int64 `json:"phantom,omitempty"`
	// StaleWrites are accepted writes made under a lease that had expired, or with a token lower than
	// one the resource had already accepted.
	StaleWrites     []StaleWrite `json:"stale_writes"`
	StaleWriteCount int          `json:"stale_write_count"`
	// RejectedStale counts writes the guard rejected that were made under an expired lease.
	RejectedStale int      `json:"rejected_stale"`
	Notes         []string `json:"notes"`
	Errors        []string `json:"errors"`
	// Illegal is the first stretch of a key's counter history porcupine could not linearize (the
	// first key checked that had one), from its first operation's invoke to its last return: by
	// its end the data had gone wrong. Nil when every stretch linearized.
	Illegal *IllegalStretch `json:"illegal,omitempty"`

	// What VisualizeResource draws: the segments worth a look, checked once more verbosely.
	visModel porcupine.Model
	visInfo  porcupine.LinearizationInfo
	visNote  string
	visReady bool
}

// IllegalStretch is a stretch of one key's counter history that no order of its operations explains.
type IllegalStretch struct {
	Key   string `json:"key"`
	From  int64  `json:"from"`
	Until int64  `json:"until"`
}

// StaleWrite is an accepted write the resource should not have taken.
type StaleWrite struct {
	Key     string `json:"key"`
	Process int    `json:"process"`
	Value   string `json:"value"`
	Token   int64  `json:"token,omitempty"`
	Read    int64  `json:"read"` // when the process read the value it wrote on
	Invoke  int64  `json:"invoke"`
	// Deadline of the lease the write was made under; Past is how long before the write it passed.
	Deadline int64 `json:"deadline,omitempty"`
	Past     int64 `json:"past,omitempty"`
	// NewerToken is a higher token the resource had accepted before this write, if any.
	NewerToken int64 `json:"newer_token,omitempty"`
	// Pause is the client pause that stopped the process between its read and its write, if any.
	Pause string `json:"pause,omitempty"`
	// Holder is the process that held the key when a write past its lease's deadline was made
	// ("p7"), granted at HolderAt; empty when nobody did.
	Holder      string `json:"holder,omitempty"`
	HolderAt    int64  `json:"holder_at,omitempty"`
	Description string `json:"description"`
}

// TokenRegression is an ok acquire whose fencing token is not above the token of an acquire of the
// same key that completed before it was invoked: the lock's tokens went backwards.
type TokenRegression struct {
	Key         string   `json:"key"`
	Earlier     HoldInfo `json:"earlier"`
	Later       HoldInfo `json:"later"`
	Cause       string   `json:"cause,omitempty"`
	Description string   `json:"description"`
}

// Kinds of counter-model operations.
const (
	opRead      = iota // a read whose write was rejected or never made: returns the value (and registers its token)
	opReadMaybe        // a read of unknown outcome that carried a token: registered it, or did nothing
	opInc              // read and accepted write: an atomic increment from the value read
	opIncMaybe         // read and a write of unknown outcome: an increment or nothing
	opWriteFail        // a write the guard rejected: the guard must reject it in that state
	opFinal            // the harness's final read
	opCarry            // synthetic: sets the state a part starts from, any of carries
	opPin              // synthetic: legal only in state carry, to ask whether a part can end there
)

type counterIn struct {
	kind    int
	process int
	read    int64 // the value read (opRead, opInc, opIncMaybe, opWriteFail), or read by opFinal
	token   int64
	carry   counterState   // opPin
	carries []counterState // opCarry
}

// counterState is the resource: its value, the highest token it accepted on a write and the
// highest a read registered (fencing).
type counterState struct{ value, highest, seen int64 }

func (s counterState) guarded() resource.State {
	return resource.State{Value: s.value, Highest: s.highest, Seen: s.seen}
}

// counterModel is the counter protected by guard. An accepted increment must find the value its
// process read (that is what mutual exclusion promises the data) and pass the guard; a rejected
// write must be one the guard rejects in that state; a write of unknown outcome is either an
// accepted increment or nothing. A lost update therefore cannot linearize, nor can a fencing guard
// that accepted a token not above the highest, nor a rejection the guard had no reason for.
// An accepted increment is its read and its write at one point: the write found the value read, so
// nothing was accepted in between, and the guard's tokens only rise, so the point can be the read's.
func counterModel(guard resource.Guard) porcupine.Model {
	register := func(s counterState, token int64) counterState {
		if guard.Registers(token) {
			s.seen = max(s.seen, token)
		}
		return s
	}
	apply := func(s counterState, in counterIn) counterState {
		s.value = in.read + 1
		if guard == resource.GuardFencing {
			s.highest = max(s.highest, in.token)
		}
		return s
	}
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{counterState{}} },
		Step: func(state, input, _ any) []any {
			s, in := state.(counterState), input.(counterIn)
			switch in.kind {
			case opCarry:
				out := make([]any, len(in.carries))
				for i, c := range in.carries {
					out[i] = c
				}
				return out
			case opPin:
				if s == in.carry {
					return []any{s}
				}
			case opRead, opFinal:
				if s.value == in.read {
					return []any{register(s, in.token)}
				}
			case opReadMaybe:
				if r := register(s, in.token); r != s {
					return []any{s, r}
				}
				return []any{s}
			case opInc:
				if s.value == in.read && guard.Accepts(s.guarded(), in.read, in.token) {
					return []any{apply(register(s, in.token), in)} // its read is folded in
				}
			case opIncMaybe:
				if s.value == in.read && guard.Accepts(s.guarded(), in.read, in.token) {
					return []any{s, apply(s, in)}
				}
				return []any{s}
			case opWriteFail:
				if !guard.Accepts(s.guarded(), in.read, in.token) {
					return []any{s}
				}
			}
			return nil
		},
		DescribeOperation: func(input, _ any) string {
			in := input.(counterIn)
			switch in.kind {
			case opRead:
				if in.token > 0 {
					return fmt.Sprintf("p%d read %d (token %d)", in.process, in.read, in.token)
				}
				return fmt.Sprintf("p%d read %d", in.process, in.read)
			case opReadMaybe:
				return fmt.Sprintf("p%d read (token %d) unknown", in.process, in.token)
			case opInc:
				return fmt.Sprintf("p%d increment %d→%d (token %d) accepted", in.process, in.read, in.read+1, in.token)
			case opIncMaybe:
				return fmt.Sprintf("p%d increment %d→%d (token %d) unknown", in.process, in.read, in.read+1, in.token)
			case opWriteFail:
				return fmt.Sprintf("p%d write %d (token %d) rejected", in.process, in.read+1, in.token)
			case opFinal:
				return fmt.Sprintf("final value %d", in.read)
			case opPin:
				return "can the segment end at " + in.carry.describe() + "?"
			}
			if len(in.carries) == 1 {
				return "segment starts at " + in.carries[0].describe()
			}
			var states []string
			for _, c := range in.carries {
				states = append(states, c.describe())
			}
			return "segment starts at one of: " + strings.Join(states, "; ")
		},
		DescribeState: func(state any) string { return state.(counterState).describe() },
	}
	return nm.ToModel()
}

func (s counterState) describe() string {
	d := fmt.Sprintf("value %d, highest token %d", s.value, s.highest)
	if s.seen > 0 {
		d += fmt.Sprintf(", highest token read %d", s.seen)
	}
	return d
}

// resOp is one counter-model operation with its interval.
type resOp struct {
	in       counterIn
	inv, ret int64
}

// checkResource runs the data-level check on the resource events of a history. holds are the
// lock-level holds (for lease deadlines), faults the fault windows (to name the pause behind a stale
// write). It returns nil when the history has no resource operations.
func checkResource(st *store, holds []hold, faults []FaultWindow, opts Options) *ResourceResult {
	sc := newResourceScan(st, holds, faults, opts)
	if !sc.scan() {
		return nil
	}
	r := sc.r
	guard, err := resource.ParseGuard(r.Guard)
	if r.Guard == "" {
		guard, err = resource.GuardNone, nil
		r.Guard = string(guard)
	}
	if err != nil {
		r.Errors = append(r.Errors, err.Error())
		r.Valid = Unknown
		return r
	}
	sort.Strings(sc.keys)
	r.countLostUpdates(sc.keys, sc.finals)
	result := r.linearizeCounters(guard, sc.keys, sc.byKey, faults, opts.Timeout)
	r.judge(result)
	return r
}

// resourceScan pairs the resource operations of a history and folds each read with the write that
// follows it into one counter operation, per key, noting stale writes on the way.
type resourceScan struct {
	st     *store
	holds  []hold
	faults []FaultWindow
	opts   Options
	r      *ResourceResult

	inflight map[int]int // process -> invoke event index of its read or write
	lastRead map[int]int // process -> its latest ok read's invoke (index)
	readVal  map[int]int64
	byKey    map[string][]resOp
	finals   map[string]int64
	accepted map[string]int64 // key -> highest token accepted so far (in completion order)
	keys     []string
	holdOf   map[int][]int // process -> its holds (indexes into holds), in start order
}

func newResourceScan(st *store, holds []hold, faults []FaultWindow, opts Options) *resourceScan {
	sc := &resourceScan{
		st: st, holds: holds, faults: faults, opts: opts,
		r:        &ResourceResult{StaleWrites: []StaleWrite{}, Notes: []string{}, Errors: []string{}},
		inflight: map[int]int{}, lastRead: map[int]int{}, readVal: map[int]int64{},
		byKey: map[string][]resOp{}, finals: map[string]int64{}, accepted: map[string]int64{},
		holdOf: map[int][]int{},
	}
	for i := range holds {
		sc.holdOf[holds[i].Process] = append(sc.holdOf[holds[i].Process], i)
	}
	return sc
}

// scan reads every resource event; it reports whether there was any.
func (sc *resourceScan) scan() bool {
	seen := false
	for _, i := range sc.st.resourcePositions() {
		e := sc.st.at(i)
		if e.F != history.FRead && e.F != history.FWrite && e.F != history.FFinal {
			continue
		}
		seen = true
		if e.Type == history.Invoke {
			sc.inflight[e.Process] = i
			continue
		}
		j, ok := sc.inflight[e.Process]
		if !ok || sc.st.at(j).F != e.F {
			continue // parse has already rejected malformed client histories
		}
		delete(sc.inflight, e.Process)
		sc.addKey(sc.st.at(j).Key)
		switch e.F {
		case history.FFinal:
			sc.final(j, e)
		case history.FRead:
			sc.read(j, e)
		case history.FWrite:
			sc.write(j, e)
		}
	}
	return seen
}

func (sc *resourceScan) addKey(k string) {
	if _, ok := sc.byKey[k]; !ok {
		sc.byKey[k] = nil
		sc.keys = append(sc.keys, k)
	}
}

// leaseAt is process's hold of key at t. A process's holds start in time order (its events are,
// validate checks it): the search skips every hold that starts after t, so a long history costs
// n log n here, not n squared.
func (sc *resourceScan) leaseAt(process int, key string, t int64) *hold {
	hs := sc.holdOf[process]
	for j := sort.Search(len(hs), func(j int) bool { return sc.holds[hs[j]].Start > t }) - 1; j >= 0; j-- {
		h := &sc.holds[hs[j]]
		if h.key == key && h.Start <= t {
			return h
		}
	}
	return nil
}

// integer is the counter value e carries; one that is not an integer is an error of the history.
func (sc *resourceScan) integer(what, key string, e *history.Event) (int64, bool) {
	v, err := strconv.ParseInt(e.Value, 10, 64)
	if err != nil {
		sc.r.Errors = append(sc.r.Errors, fmt.Sprintf("%s value %q of %s is not an integer", what, e.Value, key))
		return 0, false
	}
	return v, true
}

func (sc *resourceScan) final(j int, e *history.Event) {
	if e.Type != history.OK {
		return
	}
	inv := sc.st.at(j)
	v, ok := sc.integer("final", inv.Key, e)
	if !ok {
		return
	}
	sc.finals[inv.Key] = v
	sc.byKey[inv.Key] = append(sc.byKey[inv.Key], resOp{in: counterIn{kind: opFinal, read: v, process: -1}, inv: inv.Time, ret: e.Time})
}

func (sc *resourceScan) read(j int, e *history.Event) {
	sc.r.Reads.add(e.Type)
	inv := sc.st.at(j)
	if e.Type == history.Info && inv.Token > 0 {
		// It may have registered its token, at any time from its invoke on (resolveUnknownReads).
		sc.byKey[inv.Key] = append(sc.byKey[inv.Key], resOp{in: counterIn{kind: opReadMaybe, process: e.Process, token: inv.Token}, inv: inv.Time, ret: math.MaxInt64})
	}
	if e.Type != history.OK {
		return
	}
	v, ok := sc.integer("read", inv.Key, e)
	if !ok {
		return
	}
	sc.lastRead[e.Process], sc.readVal[e.Process] = j, v
	// Until a write follows, this read stands alone; an accepted write replaces it (write).
	sc.byKey[inv.Key] = append(sc.byKey[inv.Key], resOp{in: counterIn{kind: opRead, process: e.Process, read: v, token: inv.Token}, inv: inv.Time, ret: e.Time})
}

func (sc *resourceScan) write(j int, e *history.Event) {
	r, inv := sc.r, sc.st.at(j)
	key := inv.Key
	r.Writes.add(e.Type)
	if r.Guard == "" {
		r.Guard = inv.Guard
	}
	ri, ok := sc.lastRead[e.Process]
	if !ok {
		r.Errors = append(r.Errors, fmt.Sprintf("p%d wrote %s without a read before", e.Process, key))
		return
	}
	delete(sc.lastRead, e.Process)
	readAt := sc.st.at(ri).Time
	sc.fold(key, counterIn{process: e.Process, read: sc.readVal[e.Process], token: inv.Token}, readAt, inv.Time, e)
	sc.judgeWrite(key, inv, readAt, e)
}

// fold turns the process's read of key and its write into counter operations: one increment for an
// accepted write, the read alone plus an increment that may take effect any time after for an
// unknown one, the read and a failed write for a refused one.
func (sc *resourceScan) fold(key string, in counterIn, readAt, invoked int64, e *history.Event) {
	ops := sc.byKey[key]
	// The write belongs to the read just recorded for this process: find it and fold the two.
	k := len(ops) - 1
	for ; k >= 0; k-- {
		if ops[k].in.kind == opRead && ops[k].in.process == e.Process && ops[k].inv == readAt {
			break
		}
	}
	switch e.Type {
	case history.OK:
		in.kind = opInc
		if k >= 0 {
			ops[k] = resOp{in: in, inv: readAt, ret: e.Time}
		}
	case history.Info:
		in.kind = opIncMaybe
		if k >= 0 {
			ops = append(ops, resOp{in: in, inv: readAt, ret: math.MaxInt64})
		}
	case history.Fail:
		in.kind = opWriteFail
		ops = append(ops, resOp{in: in, inv: invoked, ret: e.Time})
	}
	sc.byKey[key] = ops
}

// judgeWrite counts a write refused for its expired lease, and notes an accepted one made past its
// lease's deadline or with a token older than one already accepted: a stale write.
func (sc *resourceScan) judgeWrite(key string, inv *history.Event, readAt int64, e *history.Event) {
	r := sc.r
	h := sc.leaseAt(e.Process, key, inv.Time)
	expired := h != nil && h.Deadline != Never && inv.Time > h.Deadline
	if e.Type == history.Fail && expired {
		r.RejectedStale++
	}
	if e.Type != history.OK {
		return
	}
	newer := sc.accepted[key]
	if expired || (inv.Token > 0 && newer > inv.Token) {
		sw := StaleWrite{Key: key, Process: e.Process, Value: inv.Value, Token: inv.Token, Read: readAt, Invoke: inv.Time}
		if expired {
			sw.Deadline, sw.Past = h.Deadline, inv.Time-h.Deadline
		}
		if inv.Token > 0 && newer > inv.Token {
			sw.NewerToken = newer
		}
		sw.Pause = pauseOf(sc.faults, e.Process, sw.Read, sw.Invoke)
		sw.Description = describeStale(&sw)
		r.StaleWriteCount++
		if len(r.StaleWrites) < sc.opts.MaxViolations {
			r.StaleWrites = append(r.StaleWrites, sw)
		}
	}
	sc.accepted[key] = max(sc.accepted[key], inv.Token)
}

// countLostUpdates compares the counters' final values with the accepted increments: every
// accepted increment should have raised its counter by one.
func (r *ResourceResult) countLostUpdates(keys []string, finals map[string]int64) {
	r.HasFinal = len(keys) > 0
	for _, k := range keys {
		v, ok := finals[k]
		if !ok {
			r.HasFinal = false
			continue
		}
		r.Final += v
	}
	if !r.HasFinal {
		r.Notes = append(r.Notes, "the history has no final value of some counter, so lost updates were not counted")
		return
	}
	r.LostUpdates = int64(r.Writes.OK) - (r.Final - r.Initial)
	if int64(r.Writes.OK+r.Writes.Info) < r.Final-r.Initial {
		// More increments than writes: the data was changed by something else. A concrete
		// counterexample, like a lost update.
		r.Phantom = r.Final - r.Initial - int64(r.Writes.OK+r.Writes.Info)
		r.Notes = append(r.Notes, fmt.Sprintf("the counters rose by %d but only %d writes may have been accepted", r.Final-r.Initial, r.Writes.OK+r.Writes.Info))
	}
	r.LostUpdates = max(r.LostUpdates, 0)
}

// linearizeCounters runs porcupine on the counter model, one key at a time, part by part, and prepares
// what the report draws.
func (r *ResourceResult) linearizeCounters(guard resource.Guard, keys []string, byKey map[string][]resOp, faults []FaultWindow, timeout time.Duration) porcupine.CheckResult {
	model := counterModel(guard)
	began := time.Now()
	timeLeft := func() time.Duration {
		if timeout <= 0 {
			return 0
		}
		return max(timeout-time.Since(began), time.Millisecond)
	}
	result := porcupine.Ok
	var drawn []resSegment
	for _, k := range keys {
		switch r.checkCounter(model, guard, k, byKey[k], timeLeft, &drawn) {
		case porcupine.Illegal:
			result = porcupine.Illegal
		case porcupine.Unknown:
			result = porcupine.Unknown
		}
		if result == porcupine.Illegal {
			break
		}
	}
	r.Porcupine = porcupineWord(result)
	r.prepareVisualization(model, drawn, faults, timeout)
	return result
}

// judge sets the verdict. A lost update is a concrete counterexample; porcupine must agree with it.
func (r *ResourceResult) judge(result porcupine.CheckResult) {
	switch {
	case len(r.Errors) > 0:
		r.Valid = Unknown
	case result == porcupine.Illegal:
		r.Valid = Invalid
	case (r.LostUpdates > 0 || r.Phantom > 0) && result == porcupine.Ok:
		r.Valid = Unknown
		r.Errors = append(r.Errors, fmt.Sprintf("checker disagreement: porcupine linearized the counter but %d updates were lost and %d appeared from nowhere", r.LostUpdates, r.Phantom))
	case r.LostUpdates > 0 || r.Phantom > 0:
		r.Valid = Invalid
	case result == porcupine.Unknown:
		r.Valid = Unknown
	default:
		r.Valid = Valid
	}
}

// add counts one completion of type t.
func (c *Counts) add(t history.Type) {
	switch t {
	case history.OK:
		c.OK++
	case history.Fail:
		c.Fail++
	case history.Info:
		c.Info++
	}
}

// pauseOf names the client pause of process that began after its read and before its write.
func pauseOf(faults []FaultWindow, process int, read, write int64) string {
	name := "p" + strconv.Itoa(process)
	for _, f := range faults {
		if f.Fault == "client-pause" && slices.Contains(f.Nodes, name) && f.Start >= read && f.Start <= write {
			return f.describe()
		}
	}
	return ""
}

func describeStale(s *StaleWrite) string {
	var b strings.Builder
	fmt.Fprintf(&b, "key %s: p%d wrote %s at %s", s.Key, s.Process, s.Value, FormatTime(s.Invoke))
	if s.Token > 0 {
		fmt.Fprintf(&b, " with token %d", s.Token)
	}
	var why []string
	if s.Past > 0 {
		past := fmt.Sprintf("%s after its lease ended at %s", FormatSpan(s.Past), FormatTime(s.Deadline))
		if s.Holder != "" {
			past += fmt.Sprintf(", while %s held the key (granted at %s)", s.Holder, FormatTime(s.HolderAt))
		}
		why = append(why, past)
	}
	if s.NewerToken > 0 {
		why = append(why, fmt.Sprintf("after the resource had accepted token %d", s.NewerToken))
	}
	b.WriteString(", " + strings.Join(why, " and ") + ", and the resource accepted it")
	if s.Pause != "" {
		b.WriteString("; paused by " + s.Pause)
	}
	return b.String()
}

// tokenRegressions counts ok acquires whose token is not above the token of an acquire of the same
// key that completed before they were invoked, and lists the first of each run of them (in invoke
// order) with the faults in between.
func tokenRegressions(st *store, p *parsed, max int) (count int, out []TokenRegression) {
	byKey := map[string][]int32{}
	for i := range p.holds {
		if p.holds[i].Token > 0 {
			byKey[p.holds[i].key] = append(byKey[p.holds[i].key], int32(i))
		}
	}
	type regression struct{ a, h *hold }
	live := map[string][]regression{}
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		// The completed acquire with the highest token so far: a folded one (fold.go) to start
		// with, and whether the last folded acquire went back too.
		best, _ := p.folded.tokenBest(k, p)
		prev := p.folded.found().regressing[k]
		walkRegressions(p.holds, byKey[k], best, 0, &prev, func(_ int32, a *hold, h int32, first bool) {
			count++
			if first && len(live[k]) < max {
				live[k] = append(live[k], regression{a, &p.holds[h]})
			}
		})
	}
	fd := p.folded.found()
	count += fd.regressions
	folded := map[string][]regression{}
	for k, prs := range fd.regressed {
		for _, pa := range prs {
			folded[k] = append(folded[k], regression{p.at(pa.a), p.at(pa.b)})
		}
	}
	for _, r := range listed(folded, live, max) {
		out = append(out, describeRegression(st, p, r.a, r.h))
	}
	return count, out
}

// describeRegression explains the acquire h, whose token was not above a's, with the faults in
// between.
func describeRegression(st *store, p *parsed, a, h *hold) TokenRegression {
	k := h.key
	tr := TokenRegression{Key: k, Earlier: a.info(), Later: h.info()}
	var hits []string
	for _, ni := range p.nemesis {
		e := p.nemesisEvent(st, ni)
		if e.Type != history.Invoke || e.Effect != history.EffectFault || e.Time < a.Invoke || e.Time > h.Start {
			continue
		}
		for _, node := range e.Nodes {
			if slices.Contains(h.nodes(), node) {
				hits = append(hits, describeNemesisEvent(e, nil))
				break
			}
		}
	}
	switch promoted := promotionCause(st, p, a, h); {
	case promoted != "":
		tr.Cause = promoted
	case len(hits) > 0:
		tr.Cause = fmt.Sprintf("%s hit %s between the two acquires, so its token counter went back", strings.Join(hits, ", "), strings.Join(h.nodes(), " "))
	default:
		tr.Cause = "no fault hit " + strings.Join(h.nodes(), " ") + " in between: the lock itself handed out a lower token"
	}
	tr.Description = fmt.Sprintf("key %s: p%d got token %d at %s after p%d had got token %d at %s; %s",
		k, h.Process, h.Token, FormatTime(h.Start), a.Process, a.Token, FormatTime(a.Start), tr.Cause)
	return tr
}

// sameLeaseAgain reports whether h is the lease a granted again to its own holder, which had not
// let it go: an etcd mutex asked again on the same session finds its own key still there (its
// release failed) and hands back that key's revision. One hold that went on, not a token reused;
// a grant to anyone else in between would have needed a higher token, and is judged against it.
func sameLeaseAgain(a, h *hold) bool {
	return a.Process == h.Process && a.Token == h.Token && a.Value == h.Value && a.Value != "" && !a.released
}

// promotionCause explains a token that went back because another node became the primary between
// the two acquires (a failover): the counter there missed the INCRs the earlier primary made. Empty
// when the later token's node was not promoted in between. The system announces a promotion after
// polling its sentinels (every 250 ms at most, at once on their announcements), so a promotion
// announced up to announceLag after the later grant counts.
func promotionCause(st *store, p *parsed, a, h *hold) string {
	const announceLag = int64(time.Second)
	if slices.Equal(a.nodes(), h.nodes()) {
		return ""
	}
	for _, ri := range p.roles {
		e := st.at(ri)
		if e.Time < a.Invoke || e.Time > h.Start+announceLag {
			continue
		}
		for _, n := range h.nodes() {
			if e.Roles[n] != "primary" {
				continue
			}
			var hits []string
			for _, ni := range p.nemesis {
				f := p.nemesisEvent(st, ni)
				if f.Type == history.Invoke && f.Effect == history.EffectFault && f.Time >= a.Invoke && f.Time <= h.Start &&
					slices.ContainsFunc(f.Nodes, func(x string) bool { return slices.Contains(a.nodes(), x) }) {
					hits = append(hits, describeNemesisEvent(f, nil))
				}
			}
			what := "no fault hit " + strings.Join(a.nodes(), " ")
			if len(hits) > 0 {
				what = strings.Join(hits, ", ")
			}
			return fmt.Sprintf("%s gave the earlier token; %s; %s was promoted to primary (announced at %s) and its token counter had not seen %s's last increments",
				strings.Join(a.nodes(), " "), what, n, FormatTime(e.Time), strings.Join(a.nodes(), " "))
		}
	}
	return ""
}

// resSegment is one cut of the counter history and porcupine's verdict on it.
type resSegment struct {
	ops    []porcupine.Operation
	result porcupine.CheckResult
}

// maxDrawnResourceOps bounds the data-level visualization: porcupine's page is unreadable beyond a
// few thousand operations.
const maxDrawnResourceOps = 3000

// prepareVisualization keeps what resource.html shows: the segments porcupine found illegal, or,
// when there is none, the segments with a rejected or unknown write (where a guard did its work),
// or else the first segment; at most maxDrawnResourceOps operations. Client pauses are drawn as
// annotations.
func (r *ResourceResult) prepareVisualization(model porcupine.Model, segs []resSegment, faults []FaultWindow, budget time.Duration) {
	interesting := func(s resSegment) bool {
		if s.result == porcupine.Illegal {
			return true
		}
		for _, op := range s.ops {
			if k := op.Input.(counterIn).kind; k == opWriteFail || k == opIncMaybe {
				return true
			}
		}
		return false
	}
	var chosen []resSegment
	total := 0
	pick := func(want func(resSegment) bool) {
		for _, s := range segs {
			if want(s) && total+len(s.ops) <= maxDrawnResourceOps {
				chosen = append(chosen, s)
				total += len(s.ops)
			}
		}
	}
	pick(func(s resSegment) bool { return s.result == porcupine.Illegal })
	if len(chosen) == 0 {
		pick(interesting)
	}
	if len(chosen) == 0 && len(segs) > 0 && len(segs[0].ops) <= maxDrawnResourceOps {
		chosen, total = segs[:1], len(segs[0].ops)
	}
	if len(chosen) < len(segs) {
		r.visNote = fmt.Sprintf("the counter history has %d segments; this page draws the %d that matter most (illegal ones first, then those with a rejected or unknown write)", len(segs), len(chosen))
	}
	ops := make([]porcupine.Operation, 0, total)
	lens := make([]int, len(chosen))
	lo, hi := int64(Never), int64(0)
	for i, s := range chosen {
		ops = append(ops, s.ops...)
		lens[i] = len(s.ops)
		for _, op := range s.ops {
			lo, hi = min(lo, op.Call), max(hi, op.Return)
		}
	}
	vm := model
	vm.Partition = partitionInto(lens)
	var info porcupine.LinearizationInfo
	if len(ops) > 0 {
		if budget <= 0 {
			budget = time.Minute
		}
		_, info = porcupine.CheckOperationsVerbose(vm, ops, budget)
	}
	var notes []porcupine.Annotation
	for _, f := range faults {
		// A paused write lands after its pause has healed, so a pause rarely overlaps the segment it
		// spoiled: draw every fault unless there are too many to read.
		if len(faults) > 200 && (f.End < lo || f.Start > hi) {
			continue
		}
		notes = append(notes, porcupine.Annotation{
			Tag: "fault: " + f.Fault, Start: f.Start, End: f.End,
			Description: strings.TrimSpace(f.F + " " + strings.Join(f.Nodes, " ")), Details: f.describe(),
			BackgroundColor: "#fde68a",
		})
	}
	for _, w := range r.StaleWrites {
		if w.Invoke < lo || w.Invoke > hi {
			continue
		}
		notes = append(notes, porcupine.Annotation{
			Tag: "stale writes", Start: w.Invoke, Description: fmt.Sprintf("p%d wrote %s", w.Process, w.Value),
			Details: w.Description, BackgroundColor: "#fca5a5",
		})
	}
	info.AddAnnotations(notes)
	r.visModel, r.visInfo, r.visReady = vm, info, true
}

// Visualize writes porcupine's HTML page of the counter model (resource.html): reads, accepted,
// rejected and unknown increments per process, client pauses and stale writes as annotations.
func (r *ResourceResult) Visualize(w io.Writer) error {
	if !r.visReady {
		return errors.New("visualize: resource result carries no linearization info (it was not produced by Check)")
	}
	var buf bytes.Buffer
	if err := porcupine.Visualize(r.visModel, r.visInfo, &buf); err != nil {
		return fmt.Errorf("visualize resource: %w", err)
	}
	_, err := w.Write(withBanner(buf.Bytes(), r.visNote))
	return err
}
