package nemesis

import (
	"time"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/systems"
)

// WithRoles returns a recorder that names, on every nemesis event, the role each of the event's
// nodes has at that moment ("kill n1" by a primary reads differently from "kill n1" by a replica).
// Independent masters have nothing to say, so events whose nodes are all masters are left as they
// are; a nil view returns rec itself.
func WithRoles(rec Recorder, view RoleView) Recorder {
	if view == nil {
		return rec
	}
	return roleRecorder{rec, view}
}

type roleRecorder struct {
	Recorder
	view RoleView
}

func (r roleRecorder) Record(e history.Event) history.Event {
	if e.IsNemesis() && len(e.Nodes) > 0 {
		roles := r.view.Roles()
		named := map[string]string{}
		for _, n := range e.Nodes {
			if role, ok := roles[n]; ok && role != systems.RoleMaster {
				named[n] = string(role)
			}
		}
		if len(named) > 0 {
			e.Roles = named
		}
	}
	return r.Recorder.Record(e)
}

func (r roleRecorder) Start() time.Time { return r.Recorder.Start() }
