package checker

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lockpick-dev/lockpick/history"
)

// faultClause is one nemesis operation as a cause names it: the fault it began on its nodes and,
// when the violation's events hold it, the heal that ended it; or only that heal, for a fault begun
// before the first acquire was asked for. One operation on several nodes is one clause, so a cause
// says "restart kill n2 n4 n5 at 3.123s, start at 3.124s" once instead of once per node.
type faultClause struct {
	fault, f string // the nemesis and its operation ("restart", "kill"); f is empty for a heal alone
	nodes    []string
	at       int64
	// inv and done are the operation's invoke and completion: a clock fault's offsets are on them.
	inv          history.Event
	done         *history.Event
	heal         string
	healAt       int64
	healFollowed bool // the heal belongs to an operation of this clause, not a fault begun earlier
}

// when is the time the clause took effect, as far as the history says.
func (c *faultClause) when() int64 {
	if c.f == "" {
		return c.healAt
	}
	return c.at
}

// text names the clause on those of its nodes in only.
func (c *faultClause) text(only []string) string {
	nodes := slices.DeleteFunc(slices.Clone(c.nodes), func(n string) bool { return !slices.Contains(only, n) })
	if c.f == "" {
		return fmt.Sprintf("%s %s in effect until %s at %s", c.fault, strings.Join(nodes, " "), c.heal, FormatTime(c.healAt))
	}
	what := c.fault
	if c.f != c.fault {
		what += " " + c.f
	}
	if len(c.inv.Offsets) > 0 {
		// A clock fault says how far it moved these nodes: "clock bump-forward n3 by +4s (measured +4.001s)".
		e := c.inv
		e.Nodes = nodes
		what += " " + describeOffsets(e, c.done)
	} else if len(nodes) > 0 {
		what += " " + strings.Join(nodes, " ")
	}
	what += " at " + FormatTime(c.at)
	if c.healFollowed {
		what += ", " + c.heal + " at " + FormatTime(c.healAt)
	}
	return what
}

// faultClauses are the nemesis operations of v that may have made a node lose the key first
// wrote: faults that took effect from first's ask to the last grant, and heals in that span of
// faults begun earlier. A heal of a fault that is a clause becomes part of that clause.
func faultClauses(v *Violation, first *HoldInfo, lastGrant int64) []faultClause {
	var out []faultClause
	for i, e := range v.Nemesis {
		if e.Type != history.Invoke {
			continue
		}
		if e.Effect == history.EffectHeal && e.F != history.FResetForward {
			// A heal after the first acquire began ends a fault that was in effect while it ran (a
			// member paused before it and woken after), whenever that fault began.
			rest := healClauses(out, e)
			if len(rest) > 0 && e.Time >= first.Invoke && e.Time <= lastGrant {
				out = append(out, faultClause{fault: e.Fault, nodes: rest, heal: e.F, healAt: e.Time})
			}
			continue
		}
		// A clock that was behind, stepped back to the real time, moves forward as a jump does.
		hits := e.Effect == history.EffectFault || e.F == history.FResetForward
		if !hits || e.Time > lastGrant {
			continue
		}
		// A fault takes effect somewhere between its invoke and its completion: one that completed
		// after the first acquire began, or had not completed by the end of the overlap (a strobe),
		// may still have removed the key that acquire set.
		done := completionOf(v.Nemesis, i)
		if e.Time < first.Invoke && done != nil && done.Time < first.Invoke {
			continue
		}
		out = append(out, faultClause{fault: e.Fault, f: e.F, nodes: e.Nodes, at: e.Time, inv: e, done: done})
	}
	return out
}

// healClauses gives heal e to the clauses it ends (same nemesis, a node in common, not yet healed),
// and returns the nodes of e that none of them hit: there it ends a fault begun earlier.
func healClauses(cs []faultClause, e history.Event) []string {
	rest := slices.Clone(e.Nodes)
	for i := range cs {
		c := &cs[i]
		if c.f != "" && !c.healFollowed && c.fault == e.Fault && slices.ContainsFunc(c.nodes, func(n string) bool { return slices.Contains(e.Nodes, n) }) {
			c.heal, c.healAt, c.healFollowed = e.F, e.Time, true
			rest = slices.DeleteFunc(rest, func(n string) bool { return slices.Contains(c.nodes, n) })
		}
	}
	return rest
}

// on returns the texts of the clauses that hit any of nodes, naming only those nodes.
func on(cs []faultClause, nodes []string) (texts []string, hit []*faultClause) {
	for i := range cs {
		if slices.ContainsFunc(cs[i].nodes, func(n string) bool { return slices.Contains(nodes, n) }) {
			texts = append(texts, cs[i].text(nodes))
			hit = append(hit, &cs[i])
		}
	}
	return texts, hit
}

// relativeTo says when the faults that began among clauses took effect relative to h's acquire:
// " (after its grant)", " (after its ask)", or " (while it asked)" for an operation in progress as it
// asked. A heal alone ends a fault begun earlier and says nothing here.
func relativeTo(hit []*faultClause, h *HoldInfo) string {
	earliest, found := int64(0), false
	for _, c := range hit {
		if c.f != "" && (!found || c.at < earliest) {
			earliest, found = c.at, true
		}
	}
	if !found {
		return ""
	}
	return " (" + relation(earliest, h) + ")"
}

func relation(t int64, h *HoldInfo) string {
	switch {
	case t >= h.Start:
		return fmt.Sprintf("after p%d's grant", h.Process)
	case t >= h.Invoke:
		return fmt.Sprintf("after p%d asked for the lock", h.Process)
	}
	return fmt.Sprintf("while p%d asked for the lock", h.Process)
}

// failoverCause explains two leases granted by different primaries: the faults that hit the first
// lease's node, and the promotion of the second's ("n1 granted p4's lease; failover kill n1 at
// 12.001s; n3 was promoted to primary (announced at 14.670s) and granted p247's at 14.623s: ...").
// Empty when no node of the second lease was promoted in between.
func failoverCause(v *Violation, first, second *HoldInfo, cs []faultClause) string {
	for _, e := range v.Roles {
		for _, n := range second.Nodes {
			if e.Roles[n] != "primary" {
				continue
			}
			what := "no fault hit " + strings.Join(first.Nodes, " ")
			if texts, _ := on(cs, first.Nodes); len(texts) > 0 {
				what = strings.Join(texts, "; ")
			}
			return fmt.Sprintf("%s granted p%d's lease; %s; %s was promoted to primary (announced at %s) and granted p%d's at %s: the promoted node never had p%d's key",
				strings.Join(first.Nodes, " "), first.Process, what, n, FormatTime(e.Time), second.Process, FormatTime(second.Start), first.Process)
		}
	}
	return ""
}

// cause names the nodes that granted both leases and the faults that hit them between the earlier
// lease's acquire and the later one's grant, one clause per nemesis operation: a node that granted
// both must have lost the earlier key in between, and the fault that made it lose the key is what
// let the second client in. When some such node was hit by no fault, the lock itself let two
// clients in, and cause says so.
func cause(v *Violation) string {
	// Each lease's keys were written somewhere between its acquire's invoke and its grant, so the
	// writes of two overlapping acquires can come in either order: the one that asked first is taken
	// as the first writer, and a fault anywhere from the first ask to the last grant can explain it.
	first, second := &v.A, &v.B
	if second.Invoke < first.Invoke || second.Invoke == first.Invoke && second.Start < first.Start {
		first, second = second, first
	}
	if len(first.Nodes) == 0 || len(second.Nodes) == 0 {
		return ""
	}
	cs := faultClauses(v, first, max(first.Start, second.Start))
	var both, unexplained []string
	for _, n := range second.Nodes {
		if !slices.Contains(first.Nodes, n) {
			continue
		}
		both = append(both, n)
		if texts, _ := on(cs, []string{n}); len(texts) == 0 {
			unexplained = append(unexplained, n)
		}
	}
	if len(both) == 0 {
		if c := failoverCause(v, first, second, cs); c != "" {
			return c
		}
		return fmt.Sprintf("p%d and p%d were granted by disjoint nodes (%s and %s)", first.Process, second.Process, strings.Join(first.Nodes, " "), strings.Join(second.Nodes, " "))
	}
	texts, hit := on(cs, both)
	if len(unexplained) > 0 && len(texts) > 0 {
		// Where the nodes agree on the lock (etcd's members), a fault on some of them is enough;
		// where each keeps it on its own (Redis), the untouched ones should have refused.
		return fmt.Sprintf("%s granted both leases; %s%s, but no fault hit %s in between: the lock let p%d in while p%d held it",
			strings.Join(both, " "), strings.Join(texts, "; "), relativeTo(hit, first), strings.Join(unexplained, " "), second.Process, first.Process)
	}
	if len(unexplained) > 0 {
		return fmt.Sprintf("%s granted both leases and no fault hit %s in between: the lock let p%d in while p%d held it", strings.Join(both, " "), strings.Join(unexplained, " "), second.Process, first.Process)
	}
	they := "they"
	if len(both) == 1 {
		they = "it"
	}
	return fmt.Sprintf("%s granted p%d's lease and then p%d's: %s lost p%d's key to %s%s",
		strings.Join(both, " "), first.Process, second.Process, they, first.Process, strings.Join(texts, "; "), relativeTo(hit, first))
}
