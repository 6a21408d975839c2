package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lockpick-dev/lockpick/containers"
)

func newCleanCmd() *cobra.Command {
	var host string
	var keepImages, dryRun bool
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Remove the containers, networks and node images that killed docker runs left behind",
		Long: `clean removes from the Docker Engine what lockpick runs created and could not remove
themselves (a run killed with SIGKILL): containers and networks whose lockpick process no longer
runs, and the cached node images no container uses. It touches nothing without lockpick's labels
and nothing of a run still going. Every docker run does the same for containers and networks
when it starts.`,
		Example: "  lockpick clean\n  lockpick clean --dry-run",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			eng, err := containers.Connect(cmd.Context(), host)
			if err != nil {
				return err
			}
			defer eng.Close()
			removed, err := eng.Clean(cmd.Context(), containers.CleanOptions{Images: !keepImages, DryRun: dryRun})
			verb := "removed"
			if dryRun {
				verb = "would remove"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s from %s\n", verb, removed, eng.Host())
			return err
		},
	}
	cmd.Flags().StringVar(&host, "docker-host", "", "Docker Engine to clean (default: DOCKER_HOST, else the local socket)")
	cmd.Flags().BoolVar(&keepImages, "keep-images", false, "keep the cached node images (a later run reuses them)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "say what would be removed, remove nothing")
	return cmd
}
