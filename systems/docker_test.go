package systems

import (
	"context"
	"log/slog"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/containers"
)

// Every Backend operation on redis-masters in containers: restart keeping and losing data, pause,
// clock, and nothing left on the Engine after Close.
func TestDockerMasters(t *testing.T) {
	ctx := context.Background()
	eng, err := containers.Connect(ctx, "")
	if err != nil {
		t.Skipf("skipping the docker backend's test: %v", err)
	}
	defer eng.Close()
	// The user cache, not a temporary directory: the shim's path is part of the node image's hash.
	shim, err := FindClockShim(ctx, "", "")
	if err != nil {
		t.Skipf("skipping the docker backend's test: %v", err)
	}
	dir := t.TempDir()
	sys, err := Start(ctx, "redis-masters", Config{
		Dir: dir, Groups: []string{"c1"}, Nodes: 2, Persistence: PersistAOFAlways, ClockShim: shim,
		Backend: BackendDocker, Docker: DockerConfig{Engine: eng, Run: dir},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	b := sys.Backend()
	n1 := sys.Nodes()[0]
	admin := AdminClient(n1.Addr)
	defer admin.Close()
	if err := admin.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	// Kill and start: the kept append-only file brings the key back; a start without data does not.
	for _, c := range []struct {
		start func(context.Context, string) error
		want  int64
	}{{b.Start, 1}, {b.StartEmpty, 0}} {
		if err := b.Kill(n1.Name); err != nil {
			t.Fatal(err)
		}
		if b.Running(n1.Name) || sys.Ping(ctx, n1.Name) == nil {
			t.Fatal("a killed node still answers")
		}
		if err := c.start(ctx, n1.Name); err != nil {
			t.Fatal(err)
		}
		if got := admin.Exists(ctx, "k").Val(); got != c.want {
			t.Fatalf("after restart, EXISTS k = %d, want %d", got, c.want)
		}
	}

	// Pause: a paused container accepts nothing until it continues.
	if err := b.Signal(n1.Name, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := sys.Ping(ctx, n1.Name); err == nil {
		t.Fatal("a paused node answered PING")
	}
	if err := b.Signal(n1.Name, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := sys.Ping(ctx, n1.Name); err != nil {
		t.Fatalf("a continued node does not answer: %v", err)
	}

	// A paused node killed dies (the freezer holds the SIGKILL back until the thaw) and starts again.
	if err := b.Signal(n1.Name, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := b.Kill(n1.Name); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx, n1.Name); err != nil {
		t.Fatal(err)
	}
	if err := sys.Ping(ctx, n1.Name); err != nil {
		t.Fatalf("a node killed while paused does not answer after its start: %v", err)
	}

	// The clock shim inside the container reads the offset the harness writes on the host.
	n2 := sys.Nodes()[1].Name
	if err := b.SetClockOffset(n2, time.Hour); err != nil {
		t.Fatal(err)
	}
	off, err := b.ClockOffset(n2)
	if err != nil {
		t.Fatal(err)
	}
	if off < time.Hour-time.Second || off > time.Hour+time.Second {
		t.Fatalf("clock offset of %s is %v, want about 1h", n2, off)
	}

	testNetCut(t, sys, n2)

	if err := sys.Close(); err != nil {
		t.Fatal(err)
	}
	left, err := eng.Leftovers(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !left.Empty() {
		t.Fatalf("Close left %s on the Engine", left)
	}
}

// testNetCut cuts node's own interface: the harness cannot reach it, in either mode, even after a
// restart while cut (the new namespace gets the rules before the node answers), until it heals.
func testNetCut(t *testing.T, sys System, node string) {
	ctx := context.Background()
	nc, ok := sys.Backend().(interface {
		CutNetwork(ctx context.Context, node, mode string) error
		HealNetwork(ctx context.Context, node string) error
	})
	if !ok {
		t.Fatal("the docker backend cannot cut a node's network")
	}
	for _, mode := range []string{"drop", "reset"} {
		if err := nc.CutNetwork(ctx, node, mode); err != nil {
			t.Fatal(err)
		}
		if err := sys.Ping(ctx, node); err == nil {
			t.Fatalf("a node cut (%s) answered PING", mode)
		}
		b := sys.Backend()
		if err := b.Kill(node); err != nil {
			t.Fatal(err)
		}
		if err := b.Start(ctx, node); err != nil {
			t.Fatalf("start of a cut node: %v", err)
		}
		if err := sys.Ping(ctx, node); err == nil {
			t.Fatalf("a node cut (%s) answered PING after its restart", mode)
		}
		if err := nc.HealNetwork(ctx, node); err != nil {
			t.Fatal(err)
		}
		if err := sys.Ping(ctx, node); err != nil {
			t.Fatalf("a healed node does not answer: %v", err)
		}
	}
}
