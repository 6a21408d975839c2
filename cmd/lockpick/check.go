package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/internal/gcbatch"
	"github.com/lockpick-dev/lockpick/results"
)

// The collector's tuning for check (gcbatch.Tune): the heap grows to five times the live heap while
// that stays under 96 MiB (a folding check's live state at 10M operations is about 80 MB), with a
// soft limit of 448 MiB; past 96 MiB live, the runtime's defaults.
const (
	checkGCPercent = 400
	checkGCSmall   = 96 << 20
	checkGCLimit   = 448 << 20
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
			// One pass over a history allocates far more than it keeps: a larger heap between
			// collections costs less CPU, and memory stays within the bounds (gcbatch).
			defer gcbatch.Tune(checkGCPercent, checkGCSmall, checkGCLimit)()
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
			// The verdict is what check is for; a directory it cannot write (a read-only copy of
			// a run, a full disk) does not change it.
			var errs []error
			if err := c.WriteRecord(info); err != nil {
				errs = append(errs, err)
			}
			errs = append(errs, c.WriteDerived(info)...)
			for _, err := range errs {
				fmt.Fprintf(cmd.ErrOrStderr(), "lockpick: warning: %v: %s (the verdict above stands)\n", err, checkFix(err, dir))
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
			return "", "", missingTarget(arg)
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

// checkFix names what to do about a file check could not write into the run directory dir.
func checkFix(err error, dir string) string {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return "free space where " + dir + " is, or check a copy of it made elsewhere"
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return "make " + dir + " writable, or check a copy of it made elsewhere"
	}
	return "check a copy of " + dir + " made elsewhere"
}

// missingTarget says what to do about a check argument that does not exist: most often store/latest
// before any run, where the fix is a run, not another path.
func missingTarget(arg string) error {
	store := filepath.Dir(filepath.Clean(arg))
	if _, err := os.Stat(store); err != nil || filepath.Base(arg) == "latest" {
		return fmt.Errorf("%s does not exist: no run is stored there yet; make one with `lockpick run --lock single --time-limit 10s --store %s`, then check %s again", arg, store, arg)
	}
	return fmt.Errorf("%s does not exist: give a run directory (ls %s lists them) or a history file", arg, store)
}
