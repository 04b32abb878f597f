package gvisor

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
)

// groupDirs lists sandbox id's directories on every hierarchy.
func groupDirs(parent, id string) []string {
	var out []string
	for _, p := range cgroups.HierarchyDirs(parent) {
		dir := filepath.Join(p, id)
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			out = append(out, dir)
		}
	}
	return out
}

// removeGroupDirs kills whatever is left in sandbox id's directories on
// every hierarchy and removes them.
func removeGroupDirs(parent, id string) error {
	var errs []error
	for _, dir := range groupDirs(parent, id) {
		cgroups.KillProcs(dir)
		if err := cgroups.RemoveDir(dir, func() { cgroups.KillProcs(dir) }); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// sweep removes what engines that are no longer running left behind: runsc
// containers (force-deleted, which kills their Sentry and gofer), cgroups on
// every hierarchy, and bundles. Leftovers of live engines are never touched.
func (b *Backend) sweep() (int, error) {
	ids := map[string]bool{}
	entries, _ := os.ReadDir(b.runscRoot)
	for _, e := range entries {
		if id, ok := stateID(e.Name()); ok {
			ids[id] = true
		}
	}
	for _, p := range cgroups.HierarchyDirs(b.opts.CgroupParent) {
		entries, _ := os.ReadDir(p)
		for _, e := range entries {
			if e.IsDir() {
				ids[e.Name()] = true
			}
		}
	}
	entries, _ = os.ReadDir(b.bundles)
	for _, e := range entries {
		ids[e.Name()] = true
	}
	removed := 0
	var errs []error
	for id := range ids {
		if hostside.EngineAlive(id) {
			continue
		}
		if err := b.deleteContainer(id); err != nil {
			errs = append(errs, err)
			// runsc could not delete it: remove its files so that they do
			// not accumulate; the processes die with their cgroup below.
			_ = removeFiles(b.stateFiles(id))
		}
		if err := removeGroupDirs(b.opts.CgroupParent, id); err != nil {
			errs = append(errs, err)
		}
		if err := os.RemoveAll(filepath.Join(b.bundles, id)); err != nil {
			errs = append(errs, err)
		}
		removed++
	}
	return removed, errors.Join(errs...)
}
