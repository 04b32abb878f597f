package images

import (
	"context"
	"fmt"
	"io"
)

// catalogImageNamed is the catalog image name stands for: itself, or the
// image a catalog runtime of that name runs in.
func (s *Store) catalogImageNamed(name string) (imageRecipe, bool) {
	if img, ok := s.cat.image(name); ok {
		return img, true
	}
	if r, ok := s.cat.runtime(name); ok {
		return s.cat.image(r.Image)
	}
	return imageRecipe{}, false
}

// checkCatalogSpec refuses what an operator says of a runtime pulled
// under a catalog name: the catalog says how its runtimes run.
func checkCatalogSpec(spec RuntimeSpec, recipe imageRecipe) error {
	if len(spec.Command) > 0 || spec.File != "" || len(spec.Env) > 0 || spec.Version != "" || spec.Libraries != nil || spec.Warm != "" || spec.Preload != nil {
		return fmt.Errorf("name: %q %s: the catalog says how its runtimes run; pull it without --command, --file, --env, --version, --libraries or --warm, or give yours another name", spec.Name, catalogWhat(spec.Name, recipe))
	}
	return nil
}

// pullCatalog is Pull of a catalog name: ref must be an image of that
// catalog image built from the recipe this binary has (its CatalogLabel
// says so, as `images push` of a catalog runtime or image writes it).
// It is then stored as that catalog image, which every catalog runtime
// of it resolves to as if it had been built here; no runtime file is
// written. A current image of that recipe already in the store is kept.
func (s *Store) pullCatalog(ctx context.Context, ref string, spec RuntimeSpec, recipe imageRecipe, sel ImageSelect, progress io.Writer) error {
	if err := checkCatalogSpec(spec, recipe); err != nil {
		return err
	}
	return fetchThen(ctx, ref, sel, progress, func(img *ociImage) error {
		return s.addCatalogImage(ctx, img, spec.Name, recipe, sel.Limits, progress)
	})
}

// addCatalogImage stores img as the catalog image recipe, asked for by
// name, when its catalog mark allows it (checkCatalogMark), all under the
// store lock. An img without an image (a pull by digest, before any
// network) is only looked up: errNotStored unless the current image of
// the recipe is that digest.
func (s *Store) addCatalogImage(ctx context.Context, img *ociImage, name string, recipe imageRecipe, limits PullLimits, progress io.Writer) error {
	unlock, err := s.lockToWrite(ctx, progress)
	if err != nil {
		return err
	}
	defer unlock()
	hash := recipeHash(recipe)
	s.mu.Lock()
	s.refreshQuietlyLocked()
	var cur *imageMeta
	if m := s.currentImageLocked(recipe.Name, true); m != nil && m.UIDBase == s.uidBase() {
		c := *m
		cur = &c
	}
	s.mu.Unlock()
	if img.img == nil {
		if cur != nil && cur.Digest == img.digest.String() {
			fmt.Fprintf(progress, "image %s is in the store already as catalog image %s %s: nothing to download\n", img.digest, recipe.Name, shortHash(hash))
			return nil
		}
		return errNotStored
	}
	if img.checkPlatform {
		if img.platform, err = checkPlatform(img.img, img.platform, img.ref); err != nil {
			return err
		}
		img.checkPlatform = false
	}
	cfg, err := img.img.ConfigFile()
	if err != nil {
		return fmt.Errorf("%s: read image config: %w", img.ref, err)
	}
	mark, err := decodeCatalogMark(cfg.Config.Labels)
	if err != nil {
		return fmt.Errorf("%s: %w", img.ref, err)
	}
	if err := checkCatalogMark(mark, name, recipe); err != nil {
		return err
	}
	switch {
	case cur != nil && cur.Digest == img.digest.String():
		fmt.Fprintf(progress, "image %s is in the store already as catalog image %s %s: nothing to download\n", img.digest, recipe.Name, shortHash(hash))
		return nil
	case cur != nil:
		// Built from the same recipe, it is the same image in all that
		// matters; replacing it would pull it from under running sandboxes.
		from := "built here"
		if cur.Ref != "" {
			from = "pulled from " + cur.Ref
		}
		fmt.Fprintf(progress, "catalog image %s %s is in the store already (%s): kept, nothing downloaded (`scratchrun images build --force %s` rebuilds it)\n",
			recipe.Name, shortHash(hash), from, recipe.Name)
		return nil
	}
	stored, err := s.storeOCI(ctx, img, s.catalogTarget(name, recipe), limits, progress)
	if err != nil {
		return err
	}
	fmt.Fprintf(progress, "catalog image %s %s is %s (%s): it runs %v\n", recipe.Name, shortHash(hash), img.ref, stored.Digest, s.runtimesOf(recipe.Name))
	return nil
}

// catalogTarget is the target of an image stored as the catalog image
// recipe: named and keyed as a build of it would be, its mark checked
// again, and every catalog runtime of it finding its program in the tree.
func (s *Store) catalogTarget(name string, recipe imageRecipe) ociTarget {
	return ociTarget{
		name: recipe.Name, key: recipeHash(recipe),
		checkConfig: func(cfg ociConfig) error { return checkCatalogMark(cfg.Catalog, name, recipe) },
		checkTree: func(rootfs string, cfg ociConfig) error {
			for _, r := range s.cat.Runtimes {
				if r.Image != recipe.Name {
					continue
				}
				if err := checkProgram(rootfs, r.Command[0]); err != nil {
					return fmt.Errorf("catalog runtime %s cannot run in this image of %s: %w", r.Name, recipe.Name, err)
				}
			}
			return nil
		},
	}
}

// runtimesOf lists the catalog runtimes that run in the catalog image.
func (s *Store) runtimesOf(image string) []string {
	var out []string
	for _, r := range s.cat.Runtimes {
		if r.Image == image {
			out = append(out, r.Name)
		}
	}
	return out
}
