package systems

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
)

// pgDropComment marks the packet filter rules lockpick adds, so that an operator can find one a
// crashed run left (iptables -S OUTPUT | grep lockpick-halfopen).
const pgDropComment = "lockpick-halfopen"

// pgDropRules are the OUTPUT rules that drop both directions of one loopback TCP connection, the
// server's port against the client's: loopback packets all pass OUTPUT, so the kernel of neither
// end sees the other's segments, keepalive probes included, and no FIN or RST is made.
func pgDropRules(serverPort, clientPort string) [][]string {
	rule := func(sport, dport string) []string {
		return []string{"OUTPUT", "-o", "lo", "-p", "tcp", "-s", "127.0.0.1", "--sport", sport,
			"-d", "127.0.0.1", "--dport", dport, "-m", "comment", "--comment", pgDropComment, "-j", "DROP"}
	}
	return [][]string{rule(serverPort, clientPort), rule(clientPort, serverPort)}
}

// pgDrops are the drop rules in place, each set removed by its heal or, at the latest, by
// removeAll when the system closes. iptables is the tool here: a Go netlink library would add a
// dependency for two rule shapes.
type pgDrops struct {
	mu    sync.Mutex
	rules [][]string
}

// add inserts rules and returns the heal that deletes them.
func (d *pgDrops) add(ctx context.Context, rules [][]string) (func(context.Context) error, error) {
	if len(rules) > 0 && os.Geteuid() != 0 {
		return nil, errors.New("dropping a connection's packets needs root (iptables): run lockpick as root, or drop the halfopen fault")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, r := range rules {
		if err := iptables(ctx, "-I", r); err != nil {
			for _, done := range rules[:i] {
				_ = iptables(context.WithoutCancel(ctx), "-D", done)
			}
			return nil, err
		}
	}
	d.rules = append(d.rules, rules...)
	return func(ctx context.Context) error { return d.remove(ctx, rules) }, nil
}

// remove deletes rules that are still in place.
func (d *pgDrops) remove(ctx context.Context, rules [][]string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, r := range rules {
		i := slices.IndexFunc(d.rules, func(have []string) bool { return slices.Equal(have, r) })
		if i < 0 {
			continue
		}
		if err := iptables(ctx, "-D", r); err != nil {
			errs = append(errs, err)
			continue
		}
		d.rules = slices.Delete(d.rules, i, i+1)
	}
	return errors.Join(errs...)
}

// removeAll deletes every rule still in place.
func (d *pgDrops) removeAll(ctx context.Context) error {
	d.mu.Lock()
	rules := slices.Clone(d.rules)
	d.mu.Unlock()
	return d.remove(ctx, rules)
}

// iptables runs one iptables command on rule (its chain first), waiting for the xtables lock.
func iptables(ctx context.Context, op string, rule []string) error {
	args := append([]string{"-w", "5", op}, rule...)
	out, err := exec.CommandContext(ctx, "iptables", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
