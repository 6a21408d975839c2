package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// buildVersion says which lockpick this is: the module version, the git revision it was built
// from, and the Go that built it. A stored run records the revision too, so a verdict can be traced
// to the code that reached it.
func buildVersion() string {
	module, rev := "(unknown)", revision
	info, ok := debug.ReadBuildInfo()
	if ok {
		module = info.Main.Version
		if module == "" {
			module = "(devel)"
		}
	}
	if rev == "" || rev == "unknown" {
		rev = vcsRevision(info, ok)
	}
	return fmt.Sprintf("lockpick %s\nrevision %s\n%s %s/%s", module, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// vcsRevision is the revision go build stamped from the checkout (-buildvcs), with -dirty when the
// tree had uncommitted changes: the Makefile's -ldflags are missing with a plain go build or go
// install.
func vcsRevision(info *debug.BuildInfo, ok bool) string {
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown (build with make, or with go build -buildvcs=true in a git checkout)"
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the module version, git revision and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), buildVersion())
			return nil
		},
	}
}
