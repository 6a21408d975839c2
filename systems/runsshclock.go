package systems

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/lockpick-dev/lockpick/sshhost"
)

// The host clock fault on the ssh backend (SSHConfig.HostClock; hostclock.go does the changes).
// Hosts are grouped by kernel (/proc/sys/kernel/random/boot_id): hosts that share one share its
// clock, so each group's clock is moved, and recorded, by its first host alone. A host that shares
// the control machine's kernel moves the harness's clock too; both are refused unless the user
// allows it (HostClockShared).

// Values of SSHConfig.HostClock.
const (
	// HostClockOwn allows moving the hosts' clocks, each host on a kernel of its own.
	HostClockOwn = "yes"
	// HostClockShared allows it also where hosts share a kernel with each other or with this machine.
	HostClockShared = "shared"
)

// bootIDFile names a running kernel: the same id, the same kernel and clock.
const bootIDFile = "/proc/sys/kernel/random/boot_id"

// HostClockMover is a backend that can move its hosts' real clocks.
type HostClockMover interface {
	// HostClocks is nil unless the run may move them.
	HostClocks() *SSHHostClocks
}

// SSHHostClocks moves the real clocks of a run's hosts (nemesis.RealClocks).
type SSHHostClocks struct{ r *sshRunner }

// HostClocks implements HostClockMover.
func (r *sshRunner) HostClocks() *SSHHostClocks {
	if r.cfg.HostClock == "" {
		return nil
	}
	return &SSHHostClocks{r}
}

// hostClockTimeout bounds one change of a host's clock.
const hostClockTimeout = 20 * time.Second

// checkHostClocks checks each host's kernel and what stands in the way of moving its clock
// (permission, a time daemon), and refuses shared kernels unless allowed, saying why.
func (r *sshRunner) checkHostClocks(ctx context.Context) error {
	local, err := os.ReadFile(bootIDFile)
	if err != nil {
		return fmt.Errorf("host clocks: this machine's kernel: %w", err)
	}
	var errs []error
	for _, m := range r.machines {
		out, err := m.h.Sh(ctx, sshhost.Quote(m.lockpick)+" internal hostclock check")
		if err != nil {
			return fmt.Errorf("host %s: check its clock: %w", m.name, err)
		}
		if p := strings.TrimSpace(string(out)); p != "" {
			errs = append(errs, fmt.Errorf("host %s: %s", m.name, strings.ReplaceAll(p, "\n", "; ")))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("--allow-host-clock: %w: stop the time daemons for the run (docs/ssh.md says how) and log in as root", errors.Join(errs...))
	}
	if r.cfg.HostClock == HostClockShared {
		return nil
	}
	return sharedKernels(strings.TrimSpace(string(local)), r.machines)
}

// sharedKernels refuses hosts that share a kernel with each other or with this machine (boot id).
func sharedKernels(local string, machines []*sshMachine) error {
	seen := map[string]string{}
	for _, m := range machines {
		if m.bootID == local {
			return fmt.Errorf("--allow-host-clock: host %s runs on this machine's kernel (the same boot_id): moving its clock moves this machine's, the harness's, too: give hosts of their own, or allow it with --allow-host-clock=shared", m.name)
		}
		if other, ok := seen[m.bootID]; ok {
			return fmt.Errorf("--allow-host-clock: hosts %s and %s share a kernel (the same boot_id): a fault on one moves both: give hosts of their own, or allow it with --allow-host-clock=shared", other, m.name)
		}
		seen[m.bootID] = m.name
	}
	return nil
}

// readBootID reads the kernel's id on m.
func readBootID(ctx context.Context, m *sshMachine) error {
	out, err := m.h.Sh(ctx, "cat "+bootIDFile)
	if err != nil {
		return fmt.Errorf("host %s: its kernel's boot id: %w", m.name, err)
	}
	m.bootID = strings.TrimSpace(string(out))
	return nil
}

// clockOf is the host that moves and records the clock of node's kernel: the first of its kernel.
func (r *sshRunner) clockOf(node string) (*sshMachine, error) {
	r.amu.Lock()
	p, ok := r.placed[node]
	r.amu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no node %s", node)
	}
	for _, m := range r.machines {
		if m.bootID == p.m.bootID {
			return m, nil
		}
	}
	return p.m, nil
}

// hostClock runs one change of node's host clock and returns its answer.
func (h *SSHHostClocks) hostClock(node string, op ...string) (string, error) {
	m, err := h.r.clockOf(node)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), hostClockTimeout)
	defer cancel()
	argv := HostClockArgs(path.Join(m.dir, HostClockRecordName), op...)
	script := sshhost.Quote(m.lockpick)
	for _, a := range argv {
		script += " " + sshhost.Quote(a)
	}
	out, err := m.h.Sh(ctx, script)
	if err != nil {
		return "", fmt.Errorf("clock of host %s (node %s): %w", m.name, node, err)
	}
	return string(out), nil
}

// SetClockOffset steps node's host clock to offset from where it would be without the faults.
func (h *SSHHostClocks) SetClockOffset(node string, offset time.Duration) error {
	_, err := h.hostClock(node, "set", offset.String())
	return err
}

// ClockOffset is how far node's host clock is now, by its host's record.
func (h *SSHHostClocks) ClockOffset(node string) (time.Duration, error) {
	out, err := h.hostClock(node, "offset")
	if err != nil {
		return 0, err
	}
	return parseHostClockOffset(out)
}

// SetClockRate makes node's host clock run fast by rate from now (0: at the frequency it had).
func (h *SSHHostClocks) SetClockRate(node string, rate float64) error {
	_, err := h.hostClock(node, "drift", fmt.Sprint(rate))
	return err
}

// Kin are the nodes placed on hosts of node's kernel, node among them, sorted.
func (h *SSHHostClocks) Kin(node string) []string {
	r := h.r
	r.amu.Lock()
	defer r.amu.Unlock()
	p, ok := r.placed[node]
	if !ok {
		return []string{node}
	}
	var kin []string
	for n, q := range r.placed {
		if q.m.bootID == p.m.bootID {
			kin = append(kin, n)
		}
	}
	slices.Sort(kin)
	return kin
}

// restoreHostClocks puts back every host clock the run's record says it moved (the run's end,
// whatever ended it), and logs what it did.
func (r *sshRunner) restoreHostClocks(ctx context.Context) error {
	if r.cfg.HostClock == "" {
		return nil
	}
	var errs []error
	for _, m := range r.machines {
		if m == nil || m.lockpick == "" {
			continue
		}
		out, err := m.h.Sh(ctx, restoreClockScript(m.dir))
		if err != nil {
			errs = append(errs, fmt.Errorf("host %s: restore its clock: %w", m.name, err))
			continue
		}
		if s := strings.TrimSpace(string(out)); s != "" {
			r.log.Info("host clock restored at the run's end", "host", m.name, "done", s)
		}
	}
	return errors.Join(errs...)
}

// restoreClockScript restores the clock the record in a run's directory dir says was moved, with
// the binary that moved it, and prints what it did; nothing without a record.
func restoreClockScript(dir string) string {
	rec, bin := sshhost.Quote(path.Join(dir, HostClockRecordName)), sshhost.Quote(path.Join(dir, "lockpick"))
	return fmt.Sprintf("[ ! -e %s ] || %s internal hostclock --record %s restore", rec, bin, rec)
}
