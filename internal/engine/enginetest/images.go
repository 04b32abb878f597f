// Package enginetest is a fake of what an engine needs of the image store
// (engine.Images), for tests of the engine's logic and of the front ends
// over a fake sandbox backend (package sandboxtest): the built-in catalog's
// runtimes, as if their images were installed, with no image on disk.
// Such tests need neither root nor `scratchrun images build`, so they run
// in the fast test tier (go test -short -race as an ordinary user).
//
// It resolves to no real root filesystem: a real backend must never be
// given its images, and nothing but tests may import this package.
package enginetest

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/images"
)

// Images is the catalog's runtimes, all or some, as if installed.
type Images struct {
	installed []images.Runtime
	catalog   []images.Runtime
	rootfs    string
}

// NewImages returns the catalog's runtimes named (all of them when none
// is) as installed. The catalog is the real one, read from a store opened
// on an empty directory of t's; t fails on a name the catalog lacks.
func NewImages(t testing.TB, runtimes ...string) *Images {
	t.Helper()
	dir := t.TempDir()
	store, err := images.OpenStore(images.Options{Root: filepath.Join(dir, "store")})
	if err != nil {
		t.Fatalf("open an empty image store for its catalog: %v", err)
	}
	im := &Images{catalog: store.Catalog(), rootfs: filepath.Join(dir, "no-rootfs")}
	if len(runtimes) == 0 {
		im.installed = im.catalog
		return im
	}
	for _, name := range runtimes {
		i := slices.IndexFunc(im.catalog, func(r images.Runtime) bool { return r.Name == name })
		if i < 0 {
			t.Fatalf("runtime %q is not in the catalog", name)
		}
		im.installed = append(im.installed, im.catalog[i])
	}
	slices.SortFunc(im.installed, func(a, b images.Runtime) int { return strings.Compare(a.Name, b.Name) })
	return im
}

// Installed returns the runtimes made installed, sorted by name.
func (im *Images) Installed() []images.Runtime { return slices.Clone(im.installed) }

// Resolve returns name's runtime with an image directory that does not
// exist (as if built here from the catalog: Built), or the store's errors: ErrInvalidName for a malformed name, a
// *images.NotInstalledError for one that is not installed.
func (im *Images) Resolve(name string) (images.Resolved, error) {
	if err := images.ValidateName("runtime", name); err != nil {
		return images.Resolved{}, err
	}
	for _, r := range im.installed {
		if r.Name == name {
			return images.Resolved{Runtime: r, RootFS: filepath.Join(im.rootfs, name), ImageDir: im.rootfs,
				UIDBase: images.DefaultUIDBase, Built: true}, nil
		}
	}
	missing := &images.NotInstalledError{Runtime: name, Known: slices.ContainsFunc(im.catalog, func(r images.Runtime) bool { return r.Name == name })}
	for _, r := range im.installed {
		missing.Installed = append(missing.Installed, r.Name)
	}
	if missing.Known {
		missing.Image = name
	}
	return images.Resolved{}, missing
}
