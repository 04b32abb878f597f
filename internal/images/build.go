package images

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/scratchrun/scratchrun/internal/images/layertar"
)

// Build builds the images named by names (image names, or runtime names
// standing for their image; empty means every catalog image) with
// mmdebstrap. An image already present for its current recipe hash and
// UID base is skipped unless force is set. Progress, including
// mmdebstrap's own output, goes to progress (nil discards it). Images are
// built one after the other; a failure does not stop the others unless ctx
// is done, and all failures are returned joined.
func (s *Store) Build(ctx context.Context, names []string, force bool, progress io.Writer) error {
	if progress == nil {
		progress = io.Discard
	}
	imgs, err := s.selectImages(names)
	if err != nil {
		return err
	}
	unlock, err := s.lockToWrite(ctx, progress)
	if err != nil {
		return err
	}
	defer unlock()
	var errs []error
	for i, img := range imgs {
		step := fmt.Sprintf("[%d/%d]", i+1, len(imgs))
		hash := recipeHash(img)
		s.mu.Lock()
		s.refreshQuietlyLocked()
		cur := s.currentImageLocked(img.Name, true)
		s.mu.Unlock()
		if cur != nil && !force {
			if cur.UIDBase == s.uidBase() {
				pulled := ""
				if cur.Ref != "" {
					pulled = " (pulled from " + cur.Ref + ")"
				}
				fmt.Fprintf(progress, "%s image %s %s is up to date%s\n", step, img.Name, shortHash(hash), pulled)
				continue
			}
			fmt.Fprintf(progress, "%s image %s %s was extracted for uid base %d, the store uses %d: rebuilding\n",
				step, img.Name, shortHash(hash), cur.UIDBase, s.uidBase())
		}
		if err := s.buildOne(ctx, step, img, hash, progress); err != nil {
			errs = append(errs, fmt.Errorf("build image %s: %w", img.Name, err))
			fmt.Fprintf(progress, "%s image %s failed: %v\n", step, img.Name, err)
			if ctx.Err() != nil {
				break
			}
		}
	}
	s.mu.Lock()
	s.refreshQuietlyLocked()
	s.mu.Unlock()
	return errors.Join(errs...)
}

// selectImages maps Build's names to catalog images, in the order first
// named, without duplicates.
func (s *Store) selectImages(names []string) ([]imageRecipe, error) {
	if len(names) == 0 {
		return slices.Clone(s.cat.Images), nil
	}
	var out []imageRecipe
	add := func(img imageRecipe) {
		if !slices.ContainsFunc(out, func(o imageRecipe) bool { return o.Name == img.Name }) {
			out = append(out, img)
		}
	}
	for _, n := range names {
		if img, ok := s.cat.image(n); ok {
			add(img)
			continue
		}
		if r, ok := s.cat.runtime(n); ok {
			img, _ := s.cat.image(r.Image)
			add(img)
			continue
		}
		s.mu.Lock()
		_, imported := s.imported[n]
		s.mu.Unlock()
		if imported {
			return nil, fmt.Errorf("names: runtime %q was imported, not built from the catalog; import it again to change it", n)
		}
		var imgNames, rtNames []string
		for _, img := range s.cat.Images {
			imgNames = append(imgNames, img.Name)
		}
		for _, r := range s.cat.Runtimes {
			rtNames = append(rtNames, r.Name)
		}
		slices.Sort(rtNames)
		return nil, fmt.Errorf("names: %q is neither a catalog image (%s) nor a catalog runtime (%s)",
			n, strings.Join(imgNames, ", "), strings.Join(rtNames, ", "))
	}
	return out, nil
}

// buildOne runs mmdebstrap into a tarball inside a fresh .tmp-* directory,
// extracts it with the store's id shift, writes image.json and only then
// renames the directory into place.
func (s *Store) buildOne(ctx context.Context, step string, img imageRecipe, hash string, progress io.Writer) (err error) {
	mmdebstrap, err := exec.LookPath("mmdebstrap")
	if err != nil {
		return fmt.Errorf("mmdebstrap is needed to build images (apt-get install mmdebstrap): %w", err)
	}
	start := time.Now()
	fmt.Fprintf(progress, "%s building image %s (recipe %s) from Debian %s with mmdebstrap ...\n",
		step, img.Name, shortHash(hash), img.Suite)
	tmp, err := os.MkdirTemp(s.imagesDir, ".tmp-"+img.Name+"-")
	if err != nil {
		return fmt.Errorf("create build directory: %w", err)
	}
	defer func() {
		if err != nil {
			removeTree(tmp)
		}
	}()
	tarPath := filepath.Join(tmp, "rootfs.tar")
	cmd := exec.CommandContext(ctx, mmdebstrap, mmdebstrapArgs(img, tarPath)...)
	cmd.Stdout, cmd.Stderr = progress, progress
	// SIGTERM, not SIGKILL, on cancel: mmdebstrap then unmounts what it
	// mounted in its own temporary chroot and removes it.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = time.Minute
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("mmdebstrap: %w", ctx.Err())
		}
		return fmt.Errorf("mmdebstrap: %w", err)
	}
	fmt.Fprintf(progress, "%s extracting image %s (uid base %d) ...\n", step, img.Name, s.uidBase())
	rootfs := filepath.Join(tmp, "rootfs")
	stats, err := s.extractFile(ctx, tarPath, rootfs)
	if err != nil {
		return err
	}
	if err := os.Remove(tarPath); err != nil {
		return fmt.Errorf("remove tarball: %w", err)
	}
	recipe := img
	meta := imageMeta{
		Name:         img.Name,
		RecipeHash:   hash,
		Recipe:       &recipe,
		Suite:        img.Suite,
		Created:      time.Now().UTC(),
		SizeBytes:    stats.Bytes,
		UIDBase:      s.uidBase(),
		Source:       SourceMmdebstrap,
		BuildSeconds: time.Since(start).Seconds(),
	}
	final := filepath.Join(s.imagesDir, img.Name+"-"+shortHash(hash))
	if err := s.finishImage(tmp, final, meta); err != nil {
		return err
	}
	fmt.Fprintf(progress, "%s image %s %s built in %.1fs: %.0f MB in %d files at %s\n",
		step, img.Name, shortHash(hash), meta.BuildSeconds, float64(stats.Bytes)/1e6, stats.Files, final)
	return nil
}

// extractFile extracts the tarball at tarPath into a new directory rootfs.
func (s *Store) extractFile(ctx context.Context, tarPath, rootfs string) (layertar.Stats, error) {
	f, err := os.Open(tarPath)
	if err != nil {
		return layertar.Stats{}, err
	}
	defer f.Close()
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return layertar.Stats{}, err
	}
	stats, err := s.extractRootfs(ctxReader{ctx, bufio.NewReaderSize(f, 1<<20)}, rootfs)
	if err != nil {
		return stats, fmt.Errorf("extract %s: %w", tarPath, err)
	}
	return stats, nil
}

// extractRootfs writes the root filesystem tarball r into rootfs, an
// existing directory, shifted for this store: how a build's output and an
// imported tarball become an image.
func (s *Store) extractRootfs(r io.Reader, rootfs string) (layertar.Stats, error) {
	x, err := layertar.New(rootfs, layertar.Options{Shift: s.shift})
	if err != nil {
		return layertar.Stats{}, err
	}
	if err := x.Apply(r); err != nil {
		x.Close()
		return layertar.Stats{}, err
	}
	return x.Finish()
}

// finishImage writes image.json into tmp, opens tmp up to 0755 (MkdirTemp
// makes it 0700, which a sandbox's shifted root could not traverse) and
// moves it to final.
func (s *Store) finishImage(tmp, final string, meta imageMeta) error {
	meta.SetIDFree = true // every image is extracted with fileMode
	if err := writeJSONAtomic(filepath.Join(tmp, "image.json"), meta); err != nil {
		return fmt.Errorf("write image.json: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := installDir(tmp, final); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshQuietlyLocked()
	return nil
}
