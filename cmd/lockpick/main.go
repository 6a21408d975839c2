// Command lockpick runs fault-injection tests of distributed locks and checks their histories.
//
// Exit codes follow Jepsen: 0 valid, 1 invalid, 2 unknown, 255 the run could not start or crashed.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/lockpick-dev/lockpick/locks"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// exitError carries an exit code out of a command.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	// go-redis logs refused dials to stderr; a restarted node refuses them by design, and the
	// history already records every failure that matters.
	redis.SetLogger(quietLogger{})
	locks.QuietLibraries()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal the run winds down; a second one kills lockpick at once (the nodes
		// die with it through their parent-death signal).
		<-ctx.Done()
		stop()
	}()
	root := newRoot()
	root.SetArgs(args)
	err := unknownCommand(root, args)
	if err == nil {
		err = root.ExecuteContext(ctx)
	}
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	default:
		fmt.Fprintln(os.Stderr, "lockpick:", err)
		return 255
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "lockpick",
		Short: "Fault-injection and linearizability testing of distributed locks",
		Long: `lockpick starts real Redis nodes, drives concurrent clients through a lock under test,
injects faults, records every operation, and checks the history with porcupine.

Exit codes: 0 valid, 1 invalid, 2 unknown, 255 the run could not start or crashed.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionText(buildStamp()),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(flagError)
	root.SuggestionsMinimumDistance = 2
	root.AddCommand(newRunCmd(), newCheckCmd(), newScenarioCmd(), newMatrixCmd(), newVersionCmd(), newServeCmd(), newSelftestCmd(), newCardCmd(), newCleanCmd(), newInternalCmd(), newOptionsTopic())
	addCompletions(root)
	return root
}
