package checker

import "github.com/lockpick-dev/lockpick/history"

// faultOp is what one nemesis operation did, read from its invoke and completion as one event: the
// completion's fields take precedence and the invoke's fill its gaps. The validator pairs a
// completion with its invoke without asking it to repeat the fault, effect or nodes, so every reader
// of what a nemesis did (crashes ending holds, causes, fault windows, liveness) reads it through
// readFault, never from one half alone.
type faultOp struct {
	F, Fault, Effect string
	// Value is what the operation names beside its nodes (a client crash's point).
	Value string
	Nodes []string
}

// readFault reads the nemesis operation invoked by inv and completed by comp (nil if it never
// completed).
func readFault(inv, comp *history.Event) faultOp {
	op := faultOp{F: inv.F, Fault: inv.Fault, Effect: inv.Effect, Value: inv.Value, Nodes: inv.Nodes}
	if comp == nil {
		return op
	}
	pick := func(c, i string) string {
		if c != "" {
			return c
		}
		return i
	}
	op.F, op.Fault, op.Effect, op.Value = pick(comp.F, inv.F), pick(comp.Fault, inv.Fault), pick(comp.Effect, inv.Effect), pick(comp.Value, inv.Value)
	if len(comp.Nodes) > 0 {
		op.Nodes = comp.Nodes
	}
	return op
}

// filled returns nemesis event e with what its operation did (fault, effect, nodes, value) as
// readFault reads the pair, so that a reader of single events (an explanation's list of faults)
// sees a partial completion as the whole operation. Offsets stay each half's own: the invoke's are
// the offsets set, the completion's those measured.
func (op faultOp) filled(e history.Event) history.Event {
	e.F, e.Fault, e.Effect, e.Value, e.Nodes = op.F, op.Fault, op.Effect, op.Value, op.Nodes
	return e
}

// matchNemesis returns the position of the in-flight nemesis invoke, among n oldest first, that the
// completion e completes: the oldest of the same operation whose fault, when both name one, is the
// same. -1 if none. The validator, the parser and the Monitor pair alike through it.
func matchNemesis(n int, at func(int) *history.Event, e *history.Event) int {
	for k := range n {
		inv := at(k)
		if inv.F == e.F && (e.Fault == "" || inv.Fault == "" || e.Fault == inv.Fault) {
			return k
		}
	}
	return -1
}

// crashes reports whether op killed client processes and took effect: a client crash or exit
// fault whose completion did not fail (a fault that failed certainly did not happen).
func (op faultOp) crashes(comp *history.Event) bool {
	return killsProcesses(op.Fault) && op.Effect == history.EffectFault && (comp == nil || comp.Type != history.Fail)
}

// faultOf reads the nemesis operation that event i (its invoke or its completion) belongs to.
func (p *parsed) faultOf(st *store, i int) faultOp {
	e := st.at(i)
	j, paired := p.pairOf[i]
	switch {
	case !paired:
		return readFault(e, nil)
	case e.Type == history.Invoke:
		return readFault(e, st.at(j))
	}
	return readFault(st.at(j), e)
}

// nemesisEvent is nemesis event i filled with what its operation did (see filled).
func (p *parsed) nemesisEvent(st *store, i int) history.Event {
	return p.faultOf(st, i).filled(*st.at(i))
}

// read reads the nemesis operation op, and returns its completion (nil if it never completed).
func (op nemOp) read(st *store) (faultOp, *history.Event) {
	var comp *history.Event
	if op.comp >= 0 {
		comp = st.at(op.comp)
	}
	return readFault(st.at(op.inv), comp), comp
}
