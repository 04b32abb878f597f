package engine

import "github.com/scratchrun/scratchrun/internal/images"

// Images is what an engine needs of an image store: the runtimes it can
// run and the image each resolves to. Production passes *images.Store;
// tests of the engine's logic over a fake backend pass a catalog that
// needs no installed image (package enginetest), so that they run without
// root in the fast test tier.
type Images interface {
	// Installed returns the runtimes that can run now, sorted by name.
	Installed() []images.Runtime
	// Resolve finds the runtime called name (or an alias of it) and its
	// image; a runtime that cannot run gives an error matching
	// images.ErrRuntimeNotInstalled.
	Resolve(name string) (images.Resolved, error)
}

var _ Images = (*images.Store)(nil)
