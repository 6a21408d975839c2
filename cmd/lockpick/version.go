package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockpick-dev/lockpick/harness"
)

// The Makefile stamps these from git with -ldflags, as go build's -buildvcs would: go build does
// not stamp a git worktree (its .git is a file, which the go command does not take for a
// checkout), and GOFLAGS=-buildvcs=false turns stamping off everywhere.
var (
	vcsRevision string // the commit hash
	vcsTime     string // the commit time, RFC 3339
	vcsModified string // "true" when the tree had changes git had not committed
	vcsTag      string // the release tag at the commit, if any
)

// stamp is what a build recorded of the source it was built from.
type stamp struct {
	// Module is the main module's version as go build set it: a release tag, a pseudo-version
	// from the checkout (Go 1.24 and later), or "(devel)".
	Module   string
	Tag      string
	Revision string
	Time     time.Time
	Modified bool
}

// buildStamp reads the binary's build information, and the Makefile's stamp where go build left
// one out.
func buildStamp() stamp {
	var s stamp
	if info, ok := debug.ReadBuildInfo(); ok {
		s.Module = info.Main.Version
		for _, kv := range info.Settings {
			switch kv.Key {
			case "vcs.revision":
				s.Revision = kv.Value
			case "vcs.time":
				s.Time, _ = time.Parse(time.RFC3339, kv.Value)
			case "vcs.modified":
				s.Modified = kv.Value == "true"
			}
		}
	}
	if s.Revision == "" && vcsRevision != "" {
		s.Revision, s.Tag, s.Modified = vcsRevision, vcsTag, vcsModified == "true"
		s.Time, _ = time.Parse(time.RFC3339, vcsTime)
	}
	return s
}

// Version is the version to cite: the release tag, or a pseudo-version in the Go module style
// (v0.0.0-20261126183932-46dafc325a37) naming the commit and its time, "+dirty" when the tree had
// uncommitted changes. A binary built without a stamp (go test, go run, -buildvcs=false outside
// make) says so rather than guess.
func (s stamp) Version() string {
	dirty := ""
	if s.Modified {
		dirty = "+dirty"
	}
	switch {
	case s.Module != "" && s.Module != "(devel)":
		return s.Module
	case s.Tag != "":
		return s.Tag + dirty
	case s.Revision != "" && !s.Time.IsZero():
		return fmt.Sprintf("v0.0.0-%s-%s%s", s.Time.UTC().Format("20060102150405"), short(s.Revision), dirty)
	case s.Revision != "":
		return fmt.Sprintf("(devel, revision %s%s)", short(s.Revision), dirty)
	}
	return "(devel, unstamped)"
}

// FullRevision is the whole commit hash, with -dirty for a modified tree; "unknown" unstamped.
func (s stamp) FullRevision() string {
	switch {
	case s.Revision == "":
		return "unknown"
	case s.Modified:
		return s.Revision + "-dirty"
	}
	return s.Revision
}

// stampConfig records which lockpick made a run, in its config.json.
func stampConfig(c *harness.Config) {
	s := buildStamp()
	c.Revision, c.Version = s.FullRevision(), s.Version()
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// versionText is what lockpick version prints: the version, the commit, and the Go that built it.
func versionText(s stamp) string {
	rev := s.FullRevision()
	if !s.Time.IsZero() {
		rev += " (" + s.Time.UTC().Format(time.RFC3339) + ")"
	}
	if s.Revision == "" {
		rev += " (build with make, or with go build -buildvcs=true in a git checkout)"
	}
	return strings.Join([]string{"lockpick " + s.Version(), "revision " + rev,
		runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH}, "\n")
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print lockpick's version, git revision and Go version",
		Long: `version prints the version to cite: the release tag, or a pseudo-version naming the commit and
its time (v0.0.0-20261126183932-46dafc325a37, +dirty when the tree had uncommitted changes). Every
run's config.json, report and card records the same version.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), versionText(buildStamp()))
			return nil
		},
	}
}
