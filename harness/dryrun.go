package harness

import (
	"cmp"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/lockpick-dev/lockpick/containers"
	"github.com/lockpick-dev/lockpick/nemesis"
	"github.com/lockpick-dev/lockpick/systems"
)

// DryRun resolves cfg and says what a run of it would do to the servers, the faults with their
// schedule included, without starting or touching anything.
func DryRun(cfg Config) (string, error) {
	if err := cfg.Resolve(); err != nil {
		return "", &StartError{err}
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("dry run: nothing is started, nothing is sent to any server")
	p("lock %s on %s, backend %s, seed %d", cfg.Lock, cfg.System, cfg.Backend, cfg.Seed)
	switch cfg.Backend {
	case systems.BackendExternal:
		if cfg.traits().Discovers {
			p("  sentinels %s: someone else's; the primary, its replicas and the other sentinels are what they report for master %q when the run starts; lockpick connects to each as a client only", strings.Join(cfg.Endpoints, ", "), cfg.MasterName)
			break
		}
		for i, n := range cfg.layout() {
			p("  node %s = %s: someone else's server; lockpick connects as a client only", n.Name, cfg.Endpoints[i])
		}
	case systems.BackendDocker:
		if !containers.IsLocalHost(cfg.DockerHost) {
			p("  %d nodes on the remote Docker Engine %s, each a pod of two containers (a network holder publishing the node's port on the Engine host, and the node's own container), of a node image built from this host's binaries, on a new private bridge network there, removed at the end", len(cfg.layout()), cmp.Or(cfg.DockerHost, os.Getenv("DOCKER_HOST")))
			if cfg.traits().Peers {
				p("  the servers talk to each other over their holders' addresses; a cut of a path between servers is iptables rules in the calling node's holder, and its latency sends the path's packets there to a queue of its own (NFQUEUE, --queue-bypass) that lockpick's own binary, packed into the node image and run in the holder, holds each packet in for half the delay each way")
			}
			break
		}
		p("  %d nodes as containers of a node image built from this host's binaries, on a new private bridge network, removed at the end", len(cfg.layout()))
		if cfg.traits().Peers {
			p("  the servers talk to each other over their containers' addresses; a cut of a path between servers is iptables rules in the calling container's network namespace, and its latency sends the path's packets there to a queue of its own (NFQUEUE, --queue-bypass) that lockpick holds each packet in for half the delay each way")
		}
	case systems.BackendSSH:
		cfg.dryRunSSH(p)
	default:
		p("  %d nodes as child processes on loopback, stopped at the end", len(cfg.layout()))
	}
	p("faults this system on backend %s can take: %s", cfg.Backend, strings.Join(cfg.offer.Kinds(), ", "))
	p("clients: %d processes in %d groups, each group through its own in-harness proxy to every node", cfg.Clients, cfg.ClientGroups)
	p("keys: %s", strings.Join(cfg.KeyNames(), ", "))
	tr := cfg.traits()
	p("  %s", tr.Keys)
	if cfg.Backend == systems.BackendExternal {
		p("at the end: "+tr.Cleanup, cfg.KeyPrefix)
		p("  (the key prefix is drawn anew for each run)")
	}
	p("time: %v of faults, then %v of recovery", time.Duration(cfg.TimeLimit), time.Duration(cfg.Recovery))
	for _, f := range cfg.faults {
		n, err := f.Build(cfg.nemesisEnv(nil))
		if err != nil {
			return "", &StartError{fmt.Errorf("--nemesis: %w", err)}
		}
		plan := n.Plan(nemesis.Seed(cfg.Seed, f.Name()), time.Duration(cfg.TimeLimit))
		p("nemesis %s: %d operations, then a final heal", f, len(plan))
		p("  it %s; it needs %s", f.Kind.Does, f.Needs())
		for _, op := range plan {
			nodes := strings.Join(op.Nodes, " ")
			if nodes == "" {
				nodes = "(targets chosen when it starts)"
			}
			p("  at %7.3fs %-6s %s", op.At.Seconds(), op.F, nodes)
		}
	}
	p("the run would be stored under %s", cfg.Store)
	return b.String(), nil
}
