package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/history"
)

const msec = int64(time.Millisecond)

// The live line counts each finding the monitor can see, in the verdict's words: a run invalid by
// an early lease loss alone never reads "violations 0".
func TestStatusLineNamesEveryLiveFinding(t *testing.T) {
	s := newStatus()
	if l := s.line(time.Second, time.Minute, time.Second); !strings.Contains(l, "findings: none") {
		t.Errorf("a quiet run's line %q", l)
	}
	for _, e := range []history.Event{
		{Time: 0, Type: history.Invoke, Process: 0, F: history.FAcquire, Key: "k"},
		{Time: 10 * msec, Type: history.OK, Process: 0, F: history.FAcquire, Key: "k", Value: "a", Deadline: 2000 * msec},
		{Time: 100 * msec, Type: history.Invoke, Process: 0, F: history.FRelease, Key: "k", Value: "a"},
		{Time: 110 * msec, Type: history.Fail, Process: 0, F: history.FRelease, Key: "k", Value: "a", Reason: history.ReasonLost},
	} {
		s.observe(&e)
	}
	if l := s.line(time.Second, time.Minute, time.Second); !strings.Contains(l, "findings: 1 early lease loss  ") {
		t.Errorf("line %q does not count the early lease loss", l)
	}
	for _, e := range []history.Event{
		{Time: 200 * msec, Type: history.Invoke, Process: 1, F: history.FAcquire, Key: "j"},
		{Time: 210 * msec, Type: history.OK, Process: 1, F: history.FAcquire, Key: "j", Value: "b", Deadline: 2000 * msec},
		{Time: 220 * msec, Type: history.Invoke, Process: 2, F: history.FAcquire, Key: "j"},
		{Time: 230 * msec, Type: history.OK, Process: 2, F: history.FAcquire, Key: "j", Value: "c", Deadline: 2000 * msec},
	} {
		s.observe(&e)
	}
	if l := s.line(time.Second, time.Minute, time.Second); !strings.Contains(l, "findings: 1 pair of overlapping holds, 1 early lease loss") {
		t.Errorf("line %q does not count both kinds", l)
	}
}

// A fault healed between two lines (a 25ms restart) still shows on the next line, once; a fault in
// effect shows as before.
func TestStatusLineShowsABriefFault(t *testing.T) {
	s := newStatus()
	s.line(500*time.Millisecond, time.Minute, time.Second)
	s.observe(&history.Event{Time: 700 * msec, Type: history.Invoke, Process: history.NemesisProcess, F: "kill", Effect: history.EffectFault, Nodes: []string{"n2"}})
	s.observe(&history.Event{Time: 725 * msec, Type: history.Invoke, Process: history.NemesisProcess, F: "start", Effect: history.EffectHeal, Nodes: []string{"n2"}})
	if l := s.line(time.Second, time.Minute, time.Second); !strings.HasSuffix(l, "fault: kill n2 (healed)") {
		t.Errorf("line %q does not show the 25ms fault", l)
	}
	if l := s.line(1500*time.Millisecond, time.Minute, time.Second); !strings.HasSuffix(l, "fault: none") {
		t.Errorf("line %q still shows a fault healed before the previous line", l)
	}
	s.observe(&history.Event{Time: 1600 * msec, Type: history.Invoke, Process: history.NemesisProcess, F: "pause", Effect: history.EffectFault, Nodes: []string{"n3"}})
	if l := s.line(2*time.Second, time.Minute, time.Second); !strings.HasSuffix(l, "fault: pause n3") {
		t.Errorf("line %q does not show the fault in effect", l)
	}
}
