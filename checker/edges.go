package checker

import (
	"fmt"
	"strings"
)

// Edges are the lease edges a run exercised: where the bugs that shorten or stretch a lease show
// (docs/edge.md). They are no evidence rule, since a plain run is no worse for not trying them,
// but the summary says which were left untried, so a valid verdict is not read as more than it is.
type Edges struct {
	// NearDeadline counts the holds released in the last tenth of their validity; ToDeadline the
	// holds that lasted until their deadline (the holder still worked, or never released).
	NearDeadline int `json:"near_deadline"`
	ToDeadline   int `json:"to_deadline"`
	// PastExpiry counts the holds without a deadline (a watchdog lock's) that lasted at least nine
	// tenths of the plan's expiry, the time the lock must renew them by.
	PastExpiry int `json:"past_expiry,omitempty"`
	// SlowClients are the planned latency nemeses aimed at a client group.
	SlowClients []string `json:"slow_clients,omitempty"`
	// TimedOut counts the acquires, releases and extends whose outcome is unknown (info).
	TimedOut int `json:"timed_out"`
	// Extends counts the extends; NearExtends those sent in the last tenth of their lease's
	// validity, or after it.
	Extends     int `json:"extends"`
	NearExtends int `json:"near_extends"`
	// TTL is the plan's; FractionalTTL is true when it is not a whole number of seconds, so a lock
	// that rounds it to seconds shows.
	TTL           int64 `json:"ttl,omitempty"`
	FractionalTTL bool  `json:"fractional_ttl"`
	// ClientClocks and NodeClocks are the planned nemeses that moved client and node clocks.
	ClientClocks []string `json:"client_clocks,omitempty"`
	NodeClocks   []string `json:"node_clocks,omitempty"`
	// Card is the command that runs the edge and fault battery for this lock.
	Card string `json:"card,omitempty"`
}

// edgesOf gathers the edges a run exercised, from its holds, counts, plan and the faults its
// nemeses applied (step 7): a planned nemesis that applied none tried nothing.
func edgesOf(run runInfo, p *parsed, s *Stats, applied []NemesisEvidence) *Edges {
	ed := &Edges{NearDeadline: s.NearDeadline, TimedOut: s.Acquires.Info + s.Releases.Info + s.Extends.Info,
		Extends: s.Extends.Total(), NearExtends: p.cul.nearExtends}
	if fs := p.folded; fs != nil {
		ed.ToDeadline, ed.PastExpiry = fs.toDeadline, fs.pastExpiry
	}
	for i := range p.holds {
		if h := &p.holds[i]; !h.dead && h.EndedBy == endExpiry && h.Deadline != Never {
			ed.ToDeadline++
		}
	}
	pl := run.plan
	if pl == nil {
		return ed
	}
	ed.TTL, ed.FractionalTTL = pl.TTL, pl.TTL%1e9 != 0
	for i := range p.holds {
		h := &p.holds[i]
		if !h.dead && h.granted == Never && pl.Expiry > 0 && h.End != Never && 10*(h.End-h.Start) >= 9*pl.Expiry {
			ed.PastExpiry++
		}
	}
	for _, n := range applied {
		if n.Applied == 0 {
			continue
		}
		spec := n.Spec
		name, params, _ := strings.Cut(strings.TrimSpace(spec), ":")
		switch {
		case name == "latency" && strings.Contains(params, "group="):
			ed.SlowClients = append(ed.SlowClients, spec)
		case name == "client-clock":
			ed.ClientClocks = append(ed.ClientClocks, spec)
		case name == "clock":
			ed.NodeClocks = append(ed.NodeClocks, spec)
		}
	}
	ed.Card = "lockpick card " + pl.Lock
	if pl.Lock == "" || pl.Lock == "client" {
		ed.Card = "lockpick card --client-cmd PROG"
	}
	return ed
}

// fewEdgeHolds is how many holds at the deadline a run needs before holds to the deadline count
// as tried: one could be luck.
const fewEdgeHolds = 3

// Line says in one line which lease edges the run tried and which it did not, and names the card
// when it tried nothing beyond holds to the deadline.
func (ed *Edges) Line() string {
	var tried, untried []string
	holds := fmt.Sprintf("%d holds released in the last tenth of their validity and %d that ran to their deadline", ed.NearDeadline, ed.ToDeadline)
	if ed.PastExpiry > 0 {
		holds += fmt.Sprintf(", %d without a deadline that lasted most of the lock's expiry or longer", ed.PastExpiry)
	}
	if ed.atEdge() < fewEdgeHolds {
		holds = "few holds at the deadline (" + holds + ")"
		untried = append(untried, holds)
	} else {
		tried = append(tried, holds)
	}
	add := func(ok bool, yes, no string) {
		if ok {
			tried = append(tried, yes)
		} else {
			untried = append(untried, no)
		}
	}
	add(len(ed.SlowClients) > 0, "slow clients ("+strings.Join(ed.SlowClients, ", ")+")", "slow clients")
	add(ed.TimedOut > 0, fmt.Sprintf("%d requests that timed out", ed.TimedOut), "requests that time out")
	add(ed.NearExtends > 0, fmt.Sprintf("%d of %d extends sent near or past the deadline", ed.NearExtends, ed.Extends), "extends near the deadline")
	ttl := "a fractional TTL"
	if ed.TTL > 0 {
		ttl = fmt.Sprintf("a fractional TTL (%s is whole seconds)", secsExact(ed.TTL))
	}
	add(ed.FractionalTTL, fmt.Sprintf("a fractional TTL (%s)", secsExact(ed.TTL)), ttl)
	add(len(ed.ClientClocks) > 0, "client clocks moved", "client clocks moved")
	add(len(ed.NodeClocks) > 0, "node clocks moved ("+strings.Join(ed.NodeClocks, ", ")+")", "node clocks drifting")
	line := "lease edges (no rule: what a valid verdict covers): tried " + orNothing(tried) + "; not tried: " + orNothing(untried)
	if len(untried) == 0 {
		return "lease edges (no rule: what a valid verdict covers): tried " + orNothing(tried)
	}
	card := ed.Card
	if card == "" {
		card = "lockpick card"
	}
	if len(tried) <= 1 && ed.atEdge() >= fewEdgeHolds {
		return fmt.Sprintf("lease edges (no rule: what a valid verdict covers): nothing at the lease's edge was tried beyond holds to the deadline (%s): `%s` runs the edge and fault battery", holds, card)
	}
	return fmt.Sprintf("%s: `%s` runs the edge and fault battery", line, card)
}

// atEdge counts the holds that reached the end of their lease.
func (ed *Edges) atEdge() int { return ed.NearDeadline + ed.ToDeadline + ed.PastExpiry }

func orNothing(s []string) string {
	if len(s) == 0 {
		return "nothing"
	}
	return strings.Join(s, ", ")
}

// secsExact renders a TTL as seconds without rounding away a fraction: "2s", "1.5s".
func secsExact(ns int64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", float64(ns)/1e9), "0"), ".") + "s"
}
