package results

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
)

// Early lease losses and late extends are findings of their own: the whole-run timeline marks each
// where it completed, in its process's slot.
func TestTimelineMarksEarlyLossesAndLateExtends(t *testing.T) {
	res := &checker.Result{
		EarlyLosses: []checker.EarlyLoss{{Key: "k", Process: 13, F: "release", Completed: 5 * ms, Description: "early"}},
		LateExtends: []checker.LateExtend{{Key: "k", Process: 4, Completed: 9 * ms, Description: "late"}},
	}
	got := marks(res, &runData{clients: 10})
	if len(got) != 2 {
		t.Fatalf("want 2 marks, got %+v", got)
	}
	if got[0].Kind != "early" || got[0].Slot != 3 || got[0].T != us(5*ms) {
		t.Errorf("early loss mark = %+v, want kind early in slot 3 at 5ms", got[0])
	}
	if got[1].Kind != "late" || got[1].Slot != 4 || got[1].T != us(9*ms) {
		t.Errorf("late extend mark = %+v, want kind late in slot 4 at 9ms", got[1])
	}
}

// A role change the system announced on a node that granted one of the violation's holds is drawn
// on that node's lane: which node was primary when is part of why two clients held at once.
func TestViolationTimelineShowsRoleChanges(t *testing.T) {
	t.Parallel() // long and CPU-bound: runs beside the package's other long checks (issue 28)
	s := &synth{clients: 10, duration: 20000 * ms, violation: true}
	s.add(history.Event{Time: 6390 * ms, Type: history.Info, Process: history.SystemProcess, F: history.FRole,
		Nodes: []string{"n1"}, Roles: map[string]string{"n1": "primary"}, Note: "+switch-master"})
	dir, res := writeRun(t, s, config(10))
	if res.Valid != checker.Invalid || len(res.Violations) == 0 || len(res.Violations[0].Roles) == 0 {
		t.Fatalf("want a violation that lists the role change, got %s with %+v", res.Valid, res.Violations)
	}
	b, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, want := range []string{`data-role="role"`, htmlText("n1 became primary at"), htmlText("+switch-master")} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
}
