package images

import (
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// ImageInfo describes one image on disk.
type ImageInfo struct {
	// Name is the image name (a catalog image, an imported runtime's
	// name, or "oci" for images stored by digest).
	Name string
	// RecipeHash is the recipe hash for built images, the tarball's
	// sha256 for rootfs imports and the digest's hex for OCI images.
	RecipeHash string
	// Source is SourceMmdebstrap, SourceImport, SourcePull,
	// SourceDockerArchive or SourceOCILayout.
	Source string
	// Path is the image directory (holding rootfs/ and image.json).
	Path string
	// SizeBytes is the total size of the image's regular files.
	SizeBytes int64
	// Created is when the image was finished.
	Created time.Time
	// Runtimes are the runtimes that run in an image of this name.
	Runtimes []string
	// Current is true when runtimes resolve to this image; false for
	// images left behind by a changed recipe or a newer import, which
	// Prune removes.
	Current bool
	// UIDBase is the host uid/gid owning the image's root files.
	UIDBase uint32
	// Ref, Digest and Platform say, for an OCI image, where it came from,
	// its digest and its platform.
	Ref, Digest, Platform string
	// FromRecipe is true for an image of a catalog recipe: built here,
	// or pulled (Ref) as that catalog image.
	FromRecipe bool
}

// List returns the images on disk, sorted by name and then newest first.
func (s *Store) List() ([]ImageInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.refreshLocked(); err != nil {
		return nil, err
	}
	runtimes := s.allRuntimesLocked()
	var out []ImageInfo
	for i := range s.images {
		m := &s.images[i]
		info := ImageInfo{
			Name:       m.Name,
			RecipeHash: m.RecipeHash,
			Source:     m.Source,
			Path:       m.dir,
			SizeBytes:  m.SizeBytes,
			Created:    m.Created,
			Current:    s.isCurrentLocked(m),
			UIDBase:    m.UIDBase,
			Ref:        m.Ref,
			Digest:     m.Digest,
			Platform:   m.Platform,
			FromRecipe: m.fromRecipe(),
		}
		for _, r := range runtimes {
			if s.runsInLocked(r, m) {
				info.Runtimes = append(info.Runtimes, r.Name)
			}
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b ImageInfo) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return b.Created.Compare(a.Created)
	})
	return out, nil
}

// Prune removes images that no runtime resolves to any more: builds from
// an outdated recipe (or of an image dropped from the catalog), imports
// superseded by a newer import of the same name, and OCI images no runtime
// runs in. The current import of a name is kept even though it has no
// recipe. It also removes leftovers of
// unfinished builds. A sandbox still using a pruned image loses it, so
// prune when the engine is idle.
func (s *Store) Prune() error {
	return s.editFresh(func() error {
		if err := s.removeStaleTmp(io.Discard); err != nil {
			return err
		}
		var errs []error
		for i := range s.images {
			m := &s.images[i]
			if s.isCurrentLocked(m) {
				continue
			}
			slog.Info("images: pruning image", "name", m.Name, "hash", shortHash(m.RecipeHash), "source", m.Source, "dir", m.dir)
			if err := removeImageDir(m.dir); err != nil {
				errs = append(errs, err)
			}
		}
		if err := s.refreshLocked(); err != nil {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
}
