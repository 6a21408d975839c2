package checker

import (
	"strings"
	"testing"

	"github.com/lockpick-dev/lockpick/history"
)

func TestClockFaultsNameTheirOffsets(t *testing.T) {
	inv := history.Event{Time: 1e9, Type: history.Invoke, Process: history.NemesisProcess, F: "bump-forward", Fault: "clock",
		Effect: history.EffectFault, Nodes: []string{"n3"}, Offsets: map[string]int64{"n3": 4e9}}
	done := inv
	done.Type, done.Time, done.Offsets = history.Info, 1.001e9, map[string]int64{"n3": 4.001e9}
	v := Violation{
		A:       HoldInfo{Process: 1, Invoke: 0.5e9, Start: 0.6e9, End: 2e9, Nodes: []string{"n1", "n2", "n3"}},
		B:       HoldInfo{Process: 2, Invoke: 1.1e9, Start: 1.2e9, End: 2.5e9, Nodes: []string{"n3", "n4", "n5"}},
		Nemesis: []history.Event{inv, done},
	}
	want := "clock bump-forward n3 by +4s (measured +4.001s)"
	if got := cause(&v); !strings.Contains(got, want) {
		t.Fatalf("cause %q does not contain %q", got, want)
	}
	if got := describeViolation(&v); !strings.Contains(got, "bump-forward n3 by +4s (measured +4.001s) at 1.000s") {
		t.Fatalf("description %q", got)
	}
	// The acquire began after the jump was invoked but before it took effect (its completion): the
	// jump is still what removed the key.
	v.A.Invoke = 1.0005e9
	if got := cause(&v); !strings.Contains(got, want) {
		t.Fatalf("cause %q does not contain %q", got, want)
	}
	// The acquire that asked first wrote first, even when it was granted last (it waited for nodes
	// that did not answer): the jump between its ask and the other's grant explains the overlap.
	v.A = HoldInfo{Process: 24, Invoke: 0.9e9, Start: 1.5e9, End: 2e9, Nodes: []string{"n1", "n2", "n3"}}
	v.B = HoldInfo{Process: 9, Invoke: 1.1e9, Start: 1.2e9, End: 2.5e9, Nodes: []string{"n3", "n4", "n5"}}
	if got := cause(&v); !strings.Contains(got, "granted p24's lease and then p9's: it lost p24's key to "+want) {
		t.Fatalf("cause %q", got)
	}
	// A strobe still running at the end of the overlap (its completion comes later) counts too.
	strobe := history.Event{Time: 0.1e9, Type: history.Invoke, Process: history.NemesisProcess, F: "strobe", Fault: "clock",
		Effect: history.EffectFault, Nodes: []string{"n3"}, Offsets: map[string]int64{"n3": 4e9}}
	v.Nemesis = []history.Event{strobe}
	if got := cause(&v); !strings.Contains(got, "clock strobe n3 by +4s") {
		t.Fatalf("cause %q does not name the strobe", got)
	}
	// A clock that was behind, stepped back to the real time, moved forward: it counts as a fault.
	reset := history.Event{Time: 1e9, Type: history.Invoke, Process: history.NemesisProcess, F: history.FResetForward, Fault: "clock",
		Effect: history.EffectHeal, Nodes: []string{"n3"}, Offsets: map[string]int64{"n3": 0}}
	v.A.Invoke = 0.5e9
	v.Nemesis = []history.Event{reset}
	if got := cause(&v); !strings.Contains(got, "clock reset-forward n3 to +0s") {
		t.Fatalf("cause %q does not name the forward reset", got)
	}
	if got := formatOffset(-0.4e6); got != "+0s" {
		t.Fatalf("formatOffset: %q", got)
	}
	if got := formatOffset(-2.5e9); got != "-2.5s" {
		t.Fatalf("formatOffset: %q", got)
	}
}
