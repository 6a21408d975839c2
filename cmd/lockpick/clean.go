package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/lockpick-dev/lockpick/containers"
	"github.com/lockpick-dev/lockpick/harness"
	"github.com/lockpick-dev/lockpick/systems"
)

func newCleanCmd() *cobra.Command {
	var host, backend string
	var keepImages, dryRun bool
	var sshOpts harness.Config
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Remove what killed runs left behind: containers, networks and node images (docker), or servers, rules and files on hosts (ssh)",
		Long: `clean removes from the Docker Engine what lockpick runs created and could not remove
themselves (a run killed with SIGKILL): containers and networks whose lockpick process no longer
runs, and the cached node images no container uses. It touches nothing without lockpick's labels
and nothing of a run still going. Every docker run does the same for containers and networks
when it starts.

With --backend ssh it logs in to each of --hosts, first puts back the host clock a killed run of
clock:source=host moved (from the record it left, ` + systems.HostClockRecordName + `), then removes
the servers whose working directory lies under lockpick's directory there (` + systems.SSHBaseDir + `/HOST),
the firewall rules with lockpick's comment, and that directory, and says per host what it restored
and removed. A run still going on the same hosts loses its nodes: clean when none is.`,
		Example: "  lockpick clean\n  lockpick clean --dry-run\n  lockpick clean --backend ssh --hosts n1,n2,n3 --ssh-key ~/.ssh/lockpick",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch backend {
			case systems.BackendSSH:
				return cleanSSH(cmd, sshOpts, dryRun)
			case systems.BackendDocker:
			default:
				return fmt.Errorf("--backend %s: clean removes what docker or ssh runs left: use --backend docker (the default) or ssh", backend)
			}
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
	cmd.Flags().StringVar(&backend, "backend", systems.BackendDocker, "whose leftovers: docker (the Engine of --docker-host) or ssh (the --hosts)")
	cmd.Flags().StringVar(&host, "docker-host", "", "Docker Engine to clean (default: DOCKER_HOST, else the local socket)")
	cmd.Flags().BoolVar(&keepImages, "keep-images", false, "keep the cached node images (a later run reuses them)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "say what would be removed, remove nothing")
	for _, name := range harness.SSHOptionNames() {
		o, _ := harness.LookupOption(name)
		addOption(cmd.Flags(), o, &sshOpts, "", o.Help)
	}
	return cmd
}

// cleanSSH removes (or with dryRun lists) what ssh runs left on the hosts of opts, per host.
func cleanSSH(cmd *cobra.Command, opts harness.Config, dryRun bool) error {
	target, err := opts.SSHTarget()
	if err != nil {
		return err
	}
	clean, verb := systems.CleanSSH, "removed"
	if dryRun {
		clean, verb = systems.SurveySSH, "would remove"
	}
	left, err := clean(cmd.Context(), target)
	printLeftovers(cmd.OutOrStdout(), verb, left)
	return err
}

func printLeftovers(w io.Writer, verb string, left []systems.SSHLeftovers) {
	for _, l := range left {
		fmt.Fprintf(w, "%s on %s\n", verb, l)
	}
}
