package systems

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// TestMain silences go-redis's own log: refused dials during start-up and after kills are expected.
// Run as `systems.test internal nfqueue-delay ...` (in a remote node's holder, whose image packs the
// running binary as it packs lockpick), it is the queue reader lockpick's hidden subcommand is.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "internal" && os.Args[2] == "nfqueue-delay" {
		os.Exit(delayQueueMain(os.Args[3:]))
	}
	redis.SetLogger(quietLogger{})
	os.Exit(m.Run())
}

// delayQueueMain parses the flags DelayQueueArgs gives and runs the reader until SIGTERM.
func delayQueueMain(args []string) int {
	fs := flag.NewFlagSet("nfqueue-delay", flag.ContinueOnError)
	queue := fs.Uint("queue", 0, "")
	delay := fs.Duration("delay", 0, "")
	jitter := fs.Duration("jitter", 0, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := RunDelayQueue(ctx, os.Stdin, os.Stdout, uint16(*queue), *delay, *jitter); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
