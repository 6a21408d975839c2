package containers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// Removed is what Clean removed (or, in a dry run, would remove), by name.
type Removed struct {
	Containers []string
	Networks   []string
	Images     []string
}

// Empty reports whether nothing was removed.
func (r Removed) Empty() bool {
	return len(r.Containers)+len(r.Networks)+len(r.Images) == 0
}

func (r Removed) String() string {
	if r.Empty() {
		return "nothing"
	}
	var parts []string
	add := func(kind string, names []string) {
		if len(names) > 0 {
			if len(names) == 1 {
				kind = strings.TrimSuffix(kind, "s")
			}
			parts = append(parts, fmt.Sprintf("%d %s (%s)", len(names), kind, strings.Join(names, ", ")))
		}
	}
	add("containers", r.Containers)
	add("networks", r.Networks)
	add("images", r.Images)
	return strings.Join(parts, ", ")
}

// CleanOptions say what Clean removes.
type CleanOptions struct {
	// Images removes the cached node images too (a later run builds them again, ~1.5 s).
	Images bool
	// DryRun lists what would be removed and removes nothing.
	DryRun bool
}

// Clean removes the containers and networks of lockpick runs whose lockpick process no longer runs
// (a run killed with SIGKILL), and with opts.Images the node images no container uses. Only
// objects carrying lockpick's labels are considered; a live run's are never touched.
func (e *Engine) Clean(ctx context.Context, opts CleanOptions) (Removed, error) {
	var out Removed
	var errs []error
	// gone holds the containers this clean removes (or would): their images count as unused, so a
	// dry run lists the images the real clean frees once those containers are gone.
	gone := map[string]bool{}
	cs, err := e.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", LabelRun)})
	if err != nil {
		return out, fmt.Errorf("list containers: %w", err)
	}
	for _, c := range cs.Items {
		if ownerAlive(c.Labels[LabelOwner]) {
			continue
		}
		name := containerName(c.ID, c.Names)
		if !opts.DryRun {
			if _, err := e.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !notFound(err) {
				errs = append(errs, fmt.Errorf("remove container %s: %w", name, err))
				continue
			}
		}
		out.Containers = append(out.Containers, name)
		gone[c.ID] = true
	}
	ns, err := e.cli.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("label", LabelRun)})
	if err != nil {
		return out, fmt.Errorf("list networks: %w", err)
	}
	for _, n := range ns.Items {
		if ownerAlive(n.Labels[LabelOwner]) {
			continue
		}
		if !opts.DryRun {
			if _, err := e.cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil && !notFound(err) {
				errs = append(errs, fmt.Errorf("remove network %s: %w", n.Name, err))
				continue
			}
		}
		out.Networks = append(out.Networks, n.Name)
	}
	if opts.Images {
		out.Images, err = e.cleanImages(ctx, opts.DryRun, gone)
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

// cleanImages removes lockpick's node images that no container uses once the containers in gone
// are removed; an image in use by a live run stays.
func (e *Engine) cleanImages(ctx context.Context, dryRun bool, gone map[string]bool) ([]string, error) {
	is, err := e.cli.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).Add("label", LabelImage)})
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	cs, err := e.cli.ContainerList(ctx, client.ContainerListOptions{All: true})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	used := imagesInUse(cs.Items, gone)
	var removed []string
	var errs []error
	for _, im := range is.Items {
		if used[im.ID] {
			continue
		}
		name := im.ID
		if len(im.RepoTags) > 0 {
			name = im.RepoTags[0]
		}
		if !dryRun {
			if _, err := e.cli.ImageRemove(ctx, im.ID, client.ImageRemoveOptions{PruneChildren: true}); err != nil && !notFound(err) {
				errs = append(errs, fmt.Errorf("remove image %s: %w", name, err))
				continue
			}
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}

// imagesInUse is the set of image IDs that the containers cs use, leaving out those in gone.
func imagesInUse(cs []container.Summary, gone map[string]bool) map[string]bool {
	used := map[string]bool{}
	for _, c := range cs {
		if !gone[c.ID] {
			used[c.ImageID] = true
		}
	}
	return used
}

// Leftovers lists the containers and networks of the runs whose label starts with run (a run's
// directory, or a store holding several), whoever owns them: what a test expects to find gone.
func (e *Engine) Leftovers(ctx context.Context, run string) (Removed, error) {
	var out Removed
	cs, err := e.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", LabelRun)})
	if err != nil {
		return out, fmt.Errorf("list containers: %w", err)
	}
	for _, c := range cs.Items {
		if strings.HasPrefix(c.Labels[LabelRun], run) {
			out.Containers = append(out.Containers, containerName(c.ID, c.Names))
		}
	}
	ns, err := e.cli.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("label", LabelRun)})
	if err != nil {
		return out, fmt.Errorf("list networks: %w", err)
	}
	for _, n := range ns.Items {
		if strings.HasPrefix(n.Labels[LabelRun], run) {
			out.Networks = append(out.Networks, n.Name)
		}
	}
	return out, nil
}

// containerName is a container's first name, else its short id.
func containerName(id string, names []string) string {
	if len(names) > 0 {
		return strings.TrimPrefix(names[0], "/")
	}
	return id[:12]
}
