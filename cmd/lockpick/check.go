package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockpick-dev/lockpick/harness"
	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/results"
)

func newCheckCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "check DIR",
		Short: "Re-check the history of a stored run",
		Long: `check reads DIR/history.jsonl (of a finished, crashed or interrupted run), checks it again,
rewrites results.json, summary.txt and the visualization in DIR, and exits with the verdict.`,
		Example: "  lockpick check store/latest",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if _, err := os.Stat(filepath.Join(dir, history.FileName)); err != nil {
				return fmt.Errorf("%s holds no %s: give the directory of a run (for example store/latest)", dir, history.FileName)
			}
			info, _ := results.ReadInfo(dir)
			res, err := harness.Check(dir, timeout, info)
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), res.Summary())
			return exitError{res.Valid.ExitCode()}
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "time the checker may take before the verdict is unknown")
	return cmd
}
