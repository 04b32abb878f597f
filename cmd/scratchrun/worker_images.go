//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/scratchrun/scratchrun/internal/images"
)

// imageSource is one NAME=REF of --images-from.
type imageSource struct{ name, ref string }

// parseImagesFrom reads --images-from's NAME=REF entries.
func parseImagesFrom(list []string) ([]imageSource, error) {
	var out []imageSource
	seen := map[string]bool{}
	for _, e := range list {
		name, ref, ok := strings.Cut(e, "=")
		if !ok || name == "" || ref == "" {
			return nil, fmt.Errorf("--images-from: %q is not NAME=REF", e)
		}
		if err := images.ValidateName("--images-from", name); err != nil {
			return nil, err
		}
		if seen[name] {
			return nil, fmt.Errorf("--images-from: %s is named twice", name)
		}
		seen[name] = true
		out = append(out, imageSource{name, ref})
	}
	return out, nil
}

// pullImagesFrom installs the runtimes of --images-from before the worker
// registers, with their progress on stderr (the worker's log): each is
// pulled by the spec its image carries, as `images pull NAME REF` does,
// so one stored under the digest its reference names now downloads
// nothing, and one whose reference moved gets the new image. SIGTERM or
// SIGINT stops it. The first failure ends it, naming the entry.
func pullImagesFrom(store *images.Store, sources []imageSource) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return pullSources(ctx, store, sources, "scratchrun worker: ", os.Stderr)
}

// pullSources pulls (or, for a path, imports) each source as `images
// pull NAME REF` does, saying so on progress with prefix; the first
// failure ends it, naming the entry. A catalog name makes the image that
// catalog image (Store.Pull).
func pullSources(ctx context.Context, store *images.Store, sources []imageSource, prefix string, progress io.Writer) error {
	for _, src := range sources {
		fmt.Fprintf(progress, "%s--images-from: %s from %s ...\n", prefix, src.name, src.ref)
		spec := images.RuntimeSpec{Name: src.name}
		var err error
		if isLocalImage(src.ref) {
			err = store.ImportImage(ctx, src.ref, spec, images.ImageSelect{}, progress)
		} else {
			err = store.Pull(ctx, src.ref, spec, images.ImageSelect{}, progress)
		}
		if err != nil {
			return fmt.Errorf("--images-from %s=%s: %w", src.name, src.ref, err)
		}
	}
	return nil
}
