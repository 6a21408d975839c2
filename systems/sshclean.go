package systems

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/lockpick-dev/lockpick/sshhost"
)

// SSHLeftovers are what runs of the ssh backend left on one host: the servers still running
// there (pid and command line), the firewall rules of their cuts, their directories, and the
// records of host clocks they moved and did not put back (after a clean: what was restored).
type SSHLeftovers struct {
	Host      string
	Processes []string
	Rules     []string
	Dirs      []string
	Clocks    []string
}

// Count is the number of things left.
func (l SSHLeftovers) Count() int {
	return len(l.Processes) + len(l.Rules) + len(l.Dirs) + len(l.Clocks)
}

// String says what was left, in one line.
func (l SSHLeftovers) String() string {
	if l.Count() == 0 {
		return l.Host + ": nothing"
	}
	var parts []string
	add := func(what string, items []string) {
		if len(items) > 0 {
			parts = append(parts, fmt.Sprintf("%d %s (%s)", len(items), what, strings.Join(items, "; ")))
		}
	}
	add("processes", l.Processes)
	add("firewall rules", l.Rules)
	add("directories", l.Dirs)
	add("host clocks", l.Clocks)
	return l.Host + ": " + strings.Join(parts, ", ")
}

// The lines a host's survey prints: "P pid cmdline", "R rule", "D dir", "C host clock record".
const sshSurveyScript = `base=%s
for p in /proc/[0-9]*; do
	d=$(readlink "$p/cwd" 2>/dev/null) || continue
	case "$d" in "$base"/*) echo "P ${p#/proc/} $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)";; esac
done
if command -v iptables >/dev/null; then iptables -w -S | %s | sed 's/^/R /'; fi
[ -d "$base" ] && find "$base" -mindepth 1 -maxdepth 1 | sed 's/^/D /'
[ -d "$base" ] && find "$base" -mindepth 2 -maxdepth 2 -name ` + HostClockRecordName + ` | sed 's/^/C /'
true`

// SurveySSH lists what runs of the ssh backend left on each host, removing nothing.
func SurveySSH(ctx context.Context, cfg SSHConfig) ([]SSHLeftovers, error) {
	return eachSSHHost(ctx, cfg, func(h *sshhost.Host, addr string) (SSHLeftovers, error) {
		return survey(ctx, h, addr)
	})
}

// CleanSSH removes what runs of the ssh backend left on each host (a run killed with SIGKILL
// cannot remove its servers, rules and files itself) and returns what it removed; a host clock
// such a run moved it first restores from the run's record. It touches only processes whose
// working directory lies under the host's directory of SSHBaseDir, rules with lockpick's comment,
// and that directory: a run still going on the same hosts loses its nodes.
func CleanSSH(ctx context.Context, cfg SSHConfig) ([]SSHLeftovers, error) {
	return eachSSHHost(ctx, cfg, func(h *sshhost.Host, addr string) (SSHLeftovers, error) {
		l, err := survey(ctx, h, addr)
		if err != nil || l.Count() == 0 {
			return l, err
		}
		// The clocks first, from their records: a record that cannot be restored stays, with its
		// directory, for the next clean.
		if l.Clocks, err = restoreClocks(ctx, h, addr, l.Clocks); err != nil {
			return l, err
		}
		var pids []string
		for _, p := range l.Processes {
			pid, _, _ := strings.Cut(p, " ")
			pids = append(pids, pid)
		}
		script := ""
		if len(pids) > 0 {
			// SIGCONT after SIGKILL is harmless, and a stopped server dies at once either way.
			script += "kill -9 " + strings.Join(pids, " ") + " 2>/dev/null; "
		}
		script += deleteRulesScript(grepComment(SSHRuleTag, true)) + "; rm -rf " + sshhost.Quote(SSHHostDir(addr)) + "; rmdir " + SSHBaseDir + " 2>/dev/null; true"
		if _, err := h.Sh(ctx, script); err != nil {
			return l, fmt.Errorf("clean %s: %w", addr, err)
		}
		after, err := survey(ctx, h, addr)
		if err == nil && after.Count() > 0 {
			err = fmt.Errorf("clean %s: still there after removal: %s", addr, after)
		}
		return l, err
	})
}

// restoreClocks puts back the host clocks the records say a killed run moved, and says per record
// what it did.
func restoreClocks(ctx context.Context, h *sshhost.Host, addr string, records []string) ([]string, error) {
	var done []string
	for _, rec := range records {
		out, err := h.Sh(ctx, restoreClockScript(path.Dir(rec)))
		if err != nil {
			return done, fmt.Errorf("clean %s: restore the clock from %s (left there for the next clean): %w", addr, rec, err)
		}
		done = append(done, strings.TrimSpace(string(out))+" (from "+rec+")")
	}
	return done, nil
}

// survey lists what runs left on one host.
func survey(ctx context.Context, h *sshhost.Host, addr string) (SSHLeftovers, error) {
	l := SSHLeftovers{Host: addr}
	out, err := h.Sh(ctx, fmt.Sprintf(sshSurveyScript, sshhost.Quote(SSHHostDir(addr)), grepComment(SSHRuleTag, true)))
	if err != nil {
		return l, fmt.Errorf("survey %s: %w", addr, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		kind, rest, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		switch kind {
		case "P":
			l.Processes = append(l.Processes, strings.TrimSpace(rest))
		case "R":
			l.Rules = append(l.Rules, rest)
		case "D":
			l.Dirs = append(l.Dirs, rest)
		case "C":
			l.Clocks = append(l.Clocks, rest)
		}
	}
	return l, nil
}

// eachSSHHost logs in to every host of cfg at once and calls f with each.
func eachSSHHost(ctx context.Context, cfg SSHConfig, f func(h *sshhost.Host, addr string) (SSHLeftovers, error)) ([]SSHLeftovers, error) {
	if len(cfg.Hosts) == 0 {
		return nil, errors.New("no hosts: add --hosts HOST[,HOST...]")
	}
	out := make([]SSHLeftovers, len(cfg.Hosts))
	errs := make([]error, len(cfg.Hosts))
	for i, addr := range cfg.Hosts {
		out[i].Host = addr
	}
	err := together(cfg.Hosts, func(addr string) error {
		h, err := cfg.Dial(ctx, addr)
		if err != nil {
			return err
		}
		defer h.Close()
		l, err := f(h, addr)
		for i, a := range cfg.Hosts {
			if a == addr {
				out[i], errs[i] = l, err
			}
		}
		return nil
	})
	return out, errors.Join(err, errors.Join(errs...))
}
