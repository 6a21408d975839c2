package checker

import (
	"fmt"
	"strings"
)

// Tally is how many findings of one kind a run had.
type Tally struct {
	// Kind is one of the Finding constants, or FindingLostUpdate and FindingData for the counter's
	// data-level findings.
	Kind  string `json:"kind"`
	Count int    `json:"count"`
}

// Data-level finding kinds: updates the counter lost, and a counter history porcupine found not
// linearizable for another reason. They have no single instant; FirstFinding names one at the end
// of the first stretch of the counter's history that porcupine could not linearize.
const (
	FindingLostUpdate = "lost-update"
	FindingData       = "data"
)

// Tallies counts the findings that make a run invalid, kind by kind, in a fixed order; kinds the run
// did not have are left out. A run is invalid exactly when this is not empty.
func (r *Result) Tallies() []Tally {
	var out []Tally
	add := func(kind string, n int) {
		if n > 0 {
			out = append(out, Tally{Kind: kind, Count: n})
		}
	}
	add(FindingViolation, r.ViolationCount)
	add(FindingEarlyLoss, r.EarlyLossCount)
	add(FindingTokenRegression, r.TokenRegressionCount)
	if res := r.Resource; res != nil {
		add(FindingStaleWrite, res.StaleWriteCount)
		add(FindingLostUpdate, int(res.LostUpdates))
		if res.Valid == Invalid && res.StaleWriteCount == 0 && res.LostUpdates == 0 {
			add(FindingData, 1)
		}
	}
	if lv := r.Liveness; lv != nil && lv.Verdict == LiveDeadlock {
		n := 0
		for _, f := range lv.Findings {
			if f.Kind == LiveDeadlock {
				n++
			}
		}
		add(FindingDeadlock, max(n, 1))
	}
	return out
}

// nouns are a kind as a count reads it: singular and plural.
func nouns(kind string) (one, many string) {
	switch kind {
	case FindingViolation:
		return "pair of overlapping holds", "pairs of overlapping holds"
	case FindingEarlyLoss:
		return "early lease loss", "early lease losses"
	case FindingTokenRegression:
		return "token regression", "token regressions"
	case FindingStaleWrite:
		return "stale write", "stale writes"
	case FindingLostUpdate:
		return "lost update", "lost updates"
	case FindingDeadlock:
		return "deadlocked key", "deadlocked keys"
	case FindingLateExtend:
		return "late extend", "late extends"
	}
	return kind, kind
}

// FindingName names one finding of a kind: "early lease loss", "overlapping holds".
func FindingName(kind string) string {
	if kind == FindingViolation {
		return "overlapping holds"
	}
	one, _ := nouns(kind)
	return one
}

// Phrase names n findings of a kind: "1 early lease loss", "2 pairs of overlapping holds".
func Phrase(kind string, n int) string {
	if kind == FindingData {
		return "counter history not linearizable"
	}
	one, many := nouns(kind)
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// Phrases names every tally: "2 pairs of overlapping holds, 1 stale write"; "" for none.
func Phrases(ts []Tally) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = Phrase(t.Kind, t.Count)
	}
	return strings.Join(parts, ", ")
}

// Headline is the verdict in one line that names what made it: "INVALID: 1 early lease loss",
// "VALID", "UNKNOWN" (UnknownReason says why).
func (r *Result) Headline() string {
	switch r.Valid {
	case Valid:
		return "VALID"
	case Invalid:
		if f := Phrases(r.Tallies()); f != "" {
			return "INVALID: " + f
		}
		return "INVALID"
	}
	return "UNKNOWN"
}
