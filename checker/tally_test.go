package checker

import (
	"strings"
	"testing"
)

// The verdict's first line names what made a run invalid, every kind with its count, in words.
func TestHeadlineNamesTheFindings(t *testing.T) {
	for _, c := range []struct {
		r    Result
		want string
	}{
		{Result{Valid: Valid}, "VALID"},
		{Result{Valid: Unknown, UnknownReason: "too few grants"}, "UNKNOWN"},
		{Result{Valid: Invalid, EarlyLossCount: 1}, "INVALID: 1 early lease loss"},
		{Result{Valid: Invalid, ViolationCount: 2, Resource: &ResourceResult{Valid: Invalid, StaleWriteCount: 1}},
			"INVALID: 2 pairs of overlapping holds, 1 stale write"},
		{Result{Valid: Invalid, TokenRegressionCount: 3, Resource: &ResourceResult{Valid: Invalid, LostUpdates: 4}},
			"INVALID: 3 token regressions, 4 lost updates"},
		{Result{Valid: Invalid, Resource: &ResourceResult{Valid: Invalid}}, "INVALID: counter history not linearizable"},
		{Result{Valid: Invalid, Liveness: &Liveness{Verdict: LiveDeadlock, Findings: []LivenessFinding{{Kind: LiveDeadlock}}}},
			"INVALID: 1 deadlocked key"},
	} {
		if got := c.r.Headline(); got != c.want {
			t.Errorf("headline %q, want %q", got, c.want)
		}
	}
}

// The summary's first line is the headline, the first finding follows it, and no line says
// "violations: 0" on a run invalid by something else.
func TestSummaryLeadsWithTheFindings(t *testing.T) {
	r := &Result{Valid: Invalid, EarlyLossCount: 1, Porcupine: "ok",
		FirstFinding: &FirstFinding{Kind: FindingEarlyLoss, At: 2e9, Description: "key k: p1's release was refused"}}
	lines := strings.Split(r.Summary(), "\n")
	if lines[0] != "verdict: INVALID: 1 early lease loss" {
		t.Errorf("first line %q", lines[0])
	}
	if lines[1] != "first finding: early lease loss at 2.000s: key k: p1's release was refused" {
		t.Errorf("second line %q", lines[1])
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "violations:") || strings.HasPrefix(l, "availability") {
			t.Errorf("summary line %q uses a word of two meanings", l)
		}
	}
}
