package checker

import (
	"fmt"
	"strings"

	"github.com/lockpick-dev/lockpick/history"
)

// killsProcesses reports whether a fault of the nemesis process ends the client processes it
// names ("p<id>"): the client-crash nemesis, and a client program's own death
// (history.FaultClientExit). A dead process does no more work, so its holds end there.
func killsProcesses(fault string) bool {
	return fault == FaultClientCrash || fault == history.FaultClientExit
}

// ClientExits are the deaths of client programs that nobody asked for: a finding about the lock's
// client (it crashed), not about mutual exclusion. Each dead process's holds ended at its death, as
// after a client crash, so the deaths do not change the verdict by themselves.
type ClientExits struct {
	// Count is every death in the history; Deaths lists the first of them.
	Count  int          `json:"count"`
	Deaths []ClientExit `json:"deaths"`
}

// ClientExit is one client program's death.
type ClientExit struct {
	Process int   `json:"process"`
	At      int64 `json:"at"`
	// Exit is how it ended ("exit status 1"); Stderr the end of its log.
	Exit   string `json:"exit"`
	Stderr string `json:"stderr,omitempty"`
}

// clientExits collects the client-exit faults of the history (at most limit listed); nil when no
// client program died.
func clientExits(st *store, p *parsed, limit int) *ClientExits {
	var ce *ClientExits
	for _, op := range p.nemOps {
		inv := st.at(op.inv)
		f, _ := op.read(st) // the invoke and completion as one (readFault)
		if f.Fault != history.FaultClientExit || f.Effect != history.EffectFault {
			continue
		}
		if ce == nil {
			ce = &ClientExits{}
		}
		ce.Count++
		if len(ce.Deaths) >= limit {
			continue
		}
		d := ClientExit{Process: -1, At: inv.Time, Exit: f.Value}
		if len(f.Nodes) > 0 {
			if pid, ok := processOf(f.Nodes[0]); ok {
				d.Process = pid
			}
		}
		if op.comp >= 0 {
			d.Stderr = st.at(op.comp).Stderr
		}
		ce.Deaths = append(ce.Deaths, d)
	}
	return ce
}

// Description is one death in a line.
func (d ClientExit) Description() string {
	s := fmt.Sprintf("p%d died at %s (%s)", d.Process, FormatTime(d.At), orUnknown(d.Exit))
	if d.Stderr != "" {
		s += "; its stderr ends: " + d.Stderr
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "how is unknown"
	}
	return s
}

// Headline is the finding in a line: how often the client program crashed.
func (ce *ClientExits) Headline() string {
	times := "times"
	if ce.Count == 1 {
		times = "time"
	}
	return fmt.Sprintf("the client program crashed %d %s (exited without being asked); each dead process's holds ended at its death, and its slot went on as a new process", ce.Count, times)
}

// summarizeClientExits writes the client program's deaths into a summary.
func (r *Result) summarizeClientExits(b *strings.Builder, show int) {
	ce := r.ClientExits
	if ce == nil {
		return
	}
	fmt.Fprintf(b, "client crashes: %s:\n", ce.Headline())
	listed := min(len(ce.Deaths), show)
	for _, d := range ce.Deaths[:listed] {
		fmt.Fprintf(b, "  %s\n", d.Description())
	}
	if ce.Count > listed {
		fmt.Fprintf(b, "  ... and %d more\n", ce.Count-listed)
	}
}
