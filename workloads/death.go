package workloads

import (
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/locks"
)

// A client program that dies by itself (locks.Mortal) is a finding about the lock's client, not
// the end of the run: its death is recorded as a client-exit fault naming its process (the
// checker ends the process's holds there, as after a client-crash), the operation it was in
// completes unknown, a dead process does no more work and releases nothing, and the slot goes on
// as a fresh process. Only a client that dies more than it works stops the run (deathTally).

// deathTally counts, over one run, the requests the processes sent their locks and the deaths of
// client programs.
type deathTally struct {
	sent, deaths atomic.Int64
}

// minDeaths is how many deaths the tally waits for before it judges: one or two early deaths among
// few requests say little.
const minDeaths = 3

// died counts death d and returns an error when more than half of all requests ended in a death:
// a client that crashes on every acquire would otherwise restart for the whole run, and a run
// that tested little but the client's crashes has no verdict to give about the lock.
func (t *deathTally) died(d locks.Death) error {
	if t == nil {
		return nil
	}
	n, sent := t.deaths.Add(1), t.sent.Load()
	if n < minDeaths || 2*n <= sent {
		return nil
	}
	return fmt.Errorf("the client program died %d times in %d requests (more than half of them): it crashes more than it works, so the run stops; fix the client (the latest death, p%d: %s; its stderr ends: %s)",
		n, sent, d.Process, d.Exit, d.Stderr)
}

// request counts one request sent to the lock.
func (t *deathTally) request() {
	if t != nil {
		t.sent.Add(1)
	}
}

// watchDeath arranges for the death of the slot's current client program to be recorded, and to
// end the process's work at once.
func (c *client) watchDeath(cancel func()) {
	m, ok := c.locker.(locks.Mortal)
	if !ok {
		return
	}
	rec := c.rec
	m.OnDeath(func(d locks.Death) {
		ev := history.Event{Type: history.Invoke, Process: history.NemesisProcess, F: history.FExit, Fault: history.FaultClientExit,
			Effect: history.EffectFault, Nodes: []string{"p" + strconv.Itoa(d.Process)}, Value: d.Exit}
		rec.Record(ev)
		ev.Type, ev.Stderr = history.Info, d.Stderr
		rec.Record(ev)
		cancel()
	})
}

// died is the death of the slot's current client program, or nil while it lives.
func (c *client) died() *locks.Death {
	if m, ok := c.locker.(locks.Mortal); ok {
		return m.Died()
	}
	return nil
}

// restarted records that the slot has gone on after the death of process pid: the client-exit
// fault's heal.
func (c *client) restarted(pid int) {
	ev := history.Event{Type: history.Invoke, Process: history.NemesisProcess, F: history.FRestart, Fault: history.FaultClientExit,
		Effect: history.EffectHeal, Nodes: []string{"p" + strconv.Itoa(pid)}}
	c.rec.Record(ev)
	ev.Type = history.Info
	c.rec.Record(ev)
}
