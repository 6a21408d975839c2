package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/results"
)

func newCheckCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "check DIR|FILE",
		Short: "Check the history of a stored run, or a history file",
		Long: `check reads DIR/history.jsonl (of a finished, crashed or interrupted run) or the history FILE,
validates it, checks it, and exits with the verdict: 0 valid, 1 invalid, 2 unknown (with the reason
and what to do), 255 when the history is broken (the error names the line). For a run directory it
also rewrites results.json, summary.txt and the visualization there; for a file it only prints.`,
		Example: "  lockpick check store/latest\n  lockpick check my-history.jsonl",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout <= 0 {
				return fmt.Errorf("--timeout %v must be positive (for example --timeout 2m)", timeout)
			}
			dir, file, err := checkTarget(args[0])
			if err != nil {
				return err
			}
			opts := checker.Options{Timeout: timeout}
			if dir == "" {
				// Read one event at a time: memory stays flat however long the history is.
				res, err := checker.CheckFile(file, opts)
				if err != nil {
					return err
				}
				fmt.Fprint(cmd.OutOrStdout(), res.Summary())
				return exitError{res.Valid.ExitCode()}
			}
			// A run directory: the verdict and its report from one pass over the history.
			c, err := results.CheckRun(dir, opts)
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), c.Result.Summary())
			info, _ := results.ReadInfo(dir) // a run that crashed before its results has none
			info.Dir = dir
			if err := c.Write(info); err != nil {
				// The verdict is what check is for; a directory it cannot write (a read-only
				// copy of a run) does not change it.
				fmt.Fprintf(cmd.ErrOrStderr(), "lockpick: %v (the verdict above stands)\n", err)
			}
			return exitError{c.Result.Valid.ExitCode()}
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "time the checker may take before the verdict is unknown")
	return cmd
}

// checkTarget resolves the argument of check: a run directory (dir is set) or a history file.
func checkTarget(arg string) (dir, file string, err error) {
	fi, err := os.Stat(arg)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", "", fmt.Errorf("%s does not exist: give a run directory (for example store/latest) or a history file", arg)
		}
		return "", "", fmt.Errorf("check %s: %w", arg, err)
	}
	if !fi.IsDir() {
		return "", arg, nil
	}
	file = filepath.Join(arg, history.FileName)
	if _, err := os.Stat(file); err != nil {
		return "", "", fmt.Errorf("%s holds no %s: give the directory of a run (for example store/latest) or a history file", arg, history.FileName)
	}
	return arg, file, nil
}
