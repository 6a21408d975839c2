package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockpick-dev/lockpick/systems"
)

// newInternalCmd holds what lockpick runs of itself where it cannot run in process, hidden from
// help: the reader of a slowed path's packet queue, in a remote node's network holder, and the
// host clock fault's changes of an ssh host's clock.
func newInternalCmd() *cobra.Command {
	c := &cobra.Command{Use: "internal", Hidden: true, Args: cobra.NoArgs,
		Short: "Helpers lockpick runs of itself in a node's containers"}
	c.AddCommand(newNfqueueDelayCmd(), newHostClockCmd())
	return c
}

// newNfqueueDelayCmd is the reader systems.DelayQueueArgs starts: SIGTERM (the run's context) or the
// end of its input ends it.
func newNfqueueDelayCmd() *cobra.Command {
	var queue uint16
	var delay, jitter time.Duration
	var untilSignal bool
	c := &cobra.Command{Use: "nfqueue-delay", Args: cobra.NoArgs,
		Short: "Hold each packet of an NFQUEUE queue in this network namespace for a delay, until SIGTERM or the end of input",
		RunE: func(cmd *cobra.Command, _ []string) error {
			in := cmd.InOrStdin()
			if untilSignal {
				in = nil
			}
			return systems.RunDelayQueue(cmd.Context(), in, cmd.OutOrStdout(), queue, delay, jitter)
		}}
	c.Flags().Uint16Var(&queue, "queue", 0, "the NFQUEUE queue number")
	c.Flags().DurationVar(&delay, "delay", 0, "how long each packet is held")
	c.Flags().DurationVar(&jitter, "jitter", 0, "plus or minus up to this much, drawn per packet")
	// A reader on an ssh host runs detached, its input /dev/null: only SIGTERM ends it there.
	c.Flags().BoolVar(&untilSignal, "until-signal", false, "ignore the input: only SIGTERM ends the reader")
	return c
}

// newHostClockCmd is what the host clock fault runs on an ssh host (systems.HostClockArgs): one
// change of the host's real clock, kept in the record it names, and one line of output.
func newHostClockCmd() *cobra.Command {
	var record string
	c := &cobra.Command{Use: "hostclock set OFFSET | drift RATE | offset | restore | check", Args: cobra.RangeArgs(1, 2),
		Short: "Move this host's real clock (adjtimex), keeping a record to restore it from",
		RunE: func(cmd *cobra.Command, args []string) error {
			line, err := systems.RunHostClock(record, args)
			if line != "" {
				fmt.Fprintln(cmd.OutOrStdout(), line)
			}
			return err
		}}
	c.Flags().StringVar(&record, "record", "", "the record of what was done to the clock ("+systems.HostClockRecordName+" in the run's directory)")
	return c
}
