package images

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Push puts the image of an installed runtime (built, imported or pulled;
// an alias pushes what it names) into a registry as ref, with the runtime
// spec in its config (RuntimeLabel) and the runtime's environment as its
// Env, so that Pull of it elsewhere needs only a name. It returns the
// reference by digest. The image is one layer, the tree as the store
// holds it with ownership shifted back to the image's own ids
// (writeTreeLayer): the same tree, pulled back from the image, pushes to
// the same digest.
func (s *Store) Push(ctx context.Context, runtimeName, ref string, insecure bool, progress io.Writer) (string, error) {
	if progress == nil {
		progress = io.Discard
	}
	r, err := parseRef(ref, insecure)
	if err != nil {
		return "", err
	}
	img, layer, err := s.imageOfRuntime(runtimeName, progress)
	if err != nil {
		return "", err
	}
	defer layer.remove()
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	fmt.Fprintf(progress, "pushing %s (%.1f MB) to %s ...\n", digest, float64(layer.size)/1e6, r)
	if err := remote.Write(r, img, remoteOptions(ctx)...); err != nil {
		return "", registryError(r, err)
	}
	byDigest := r.Context().Digest(digest.String()).String()
	fmt.Fprintf(progress, "pushed runtime %s as %s\n", runtimeName, byDigest)
	return byDigest, nil
}

// Export writes the image Push would push for a runtime to dest, for
// machines without a registry: an OCI image layout directory (dest must
// not exist, or be empty), or, for a dest ending in .tar, a `docker save`
// archive tagged scratchrun/RUNTIME:latest. ImportImage (and `docker
// load`) take either; the layout keeps the manifest digest Push gives,
// an archive's image is known by its config's digest (its image ID). It
// returns that digest.
func (s *Store) Export(runtimeName, dest string, progress io.Writer) (v1.Hash, error) {
	if progress == nil {
		progress = io.Discard
	}
	abs, err := filepath.Abs(dest)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("export: %w", err)
	}
	archive := strings.HasSuffix(abs, ".tar")
	if fi, err := os.Stat(abs); err == nil {
		if archive || !fi.IsDir() {
			return v1.Hash{}, fmt.Errorf("export: %s exists already", abs)
		}
		if entries, err := os.ReadDir(abs); err != nil || len(entries) > 0 {
			return v1.Hash{}, fmt.Errorf("export: directory %s is not empty", abs)
		}
	}
	img, layer, err := s.imageOfRuntime(runtimeName, progress)
	if err != nil {
		return v1.Hash{}, err
	}
	defer layer.remove()
	if archive {
		return exportArchive(img, runtimeName, abs, progress)
	}
	return exportLayout(img, runtimeName, abs, progress)
}

// exportArchive writes img as a docker save archive at path, through a
// temporary file renamed into place.
func exportArchive(img v1.Image, runtimeName, path string, progress io.Writer) (_ v1.Hash, err error) {
	tag, err := name.NewTag("scratchrun/" + runtimeName + ":latest")
	if err != nil {
		return v1.Hash{}, fmt.Errorf("export: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-")
	if err != nil {
		return v1.Hash{}, fmt.Errorf("export: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := tarball.Write(tag, img, f); err != nil {
		return v1.Hash{}, fmt.Errorf("export %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return v1.Hash{}, err
	}
	if err := f.Close(); err != nil {
		return v1.Hash{}, fmt.Errorf("export %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return v1.Hash{}, fmt.Errorf("export %s: %w", path, err)
	}
	id, err := img.ConfigName()
	if err != nil {
		return v1.Hash{}, err
	}
	fmt.Fprintf(progress, "exported runtime %s to %s (a docker save archive, image %s)\n", runtimeName, path, id)
	return id, nil
}

// exportLayout writes img as the one image of an OCI layout at dir,
// named by the runtime (org.opencontainers.image.ref.name), through a
// temporary directory renamed into place.
func exportLayout(img v1.Image, runtimeName, dir string, progress io.Writer) (_ v1.Hash, err error) {
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".tmp-"+filepath.Base(dir)+"-")
	if err != nil {
		return v1.Hash{}, fmt.Errorf("export: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	p, err := layout.Write(tmp, empty.Index)
	if err == nil {
		err = p.AppendImage(img, layout.WithAnnotations(map[string]string{refNameAnnotation: runtimeName}))
	}
	if err == nil {
		err = os.Chmod(tmp, 0o755)
	}
	if err == nil {
		err = os.Rename(tmp, dir)
	}
	if err != nil {
		return v1.Hash{}, fmt.Errorf("export %s: %w", dir, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	fmt.Fprintf(progress, "exported runtime %s to %s (an OCI layout, image %s)\n", runtimeName, dir, digest)
	return digest, nil
}

// imageOfRuntime makes the OCI image of an installed runtime, or of a
// catalog image by its name: its tree as one layer (in a temporary file
// the caller removes), and a config with the runtime's environment, its
// spec as RuntimeLabel (none for a catalog image: its runtimes are the
// catalog's), the catalog mark of an image of a recipe (CatalogLabel,
// catalogMarkOf), and what a pulled
// image's config said of its user, directory and entrypoint (recorded,
// not applied here, but meaningful to other tools). Nothing in it depends
// on when or where it is made.
func (s *Store) imageOfRuntime(runtimeName string, progress io.Writer) (v1.Image, *treeLayer, error) {
	res, err := s.resolveForPush(runtimeName)
	if err != nil {
		return nil, nil, err
	}
	var meta imageMeta
	if err := readJSON(filepath.Join(res.ImageDir, "image.json"), &meta); err != nil {
		return nil, nil, fmt.Errorf("image of %s: %w", runtimeName, err)
	}
	platform := meta.Platform
	if platform == "" {
		platform = "linux/" + runtime.GOARCH // built and imported trees are the host's
	}
	p, err := v1.ParsePlatform(platform)
	if err != nil {
		return nil, nil, fmt.Errorf("image of %s: platform %q: %w", runtimeName, platform, err)
	}
	what := "runtime " + res.Runtime.Name
	if res.Runtime.Name == "" {
		what = "catalog image " + runtimeName
	}
	fmt.Fprintf(progress, "packing %s: %s (%s) ...\n", what, res.ImageDir, p)
	layer, err := writeTreeLayer(res.RootFS, "", res.UIDBase, progress)
	if err != nil {
		return nil, nil, err
	}
	rt := res.Runtime
	var env []string
	for _, k := range slices.Sorted(maps.Keys(rt.Env)) {
		env = append(env, k+"="+rt.Env[k])
	}
	labels := map[string]string{}
	if rt.Name != "" {
		labels[RuntimeLabel] = specOfRuntime(rt).encode()
	}
	if mark := catalogMarkOf(&meta); mark != nil {
		labels[CatalogLabel] = mark.encode()
	}
	cf := &v1.ConfigFile{
		Architecture: p.Architecture, OS: p.OS, Variant: p.Variant,
		RootFS:  v1.RootFS{Type: "layers", DiffIDs: []v1.Hash{layer.diffID}},
		History: []v1.History{{CreatedBy: "scratchrun images push"}},
		Config: v1.Config{
			Env:        env,
			Labels:     labels,
			User:       meta.Config.User,
			WorkingDir: meta.Config.WorkingDir,
			Entrypoint: meta.Config.Entrypoint,
			Cmd:        meta.Config.Cmd,
		},
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer})
	if err == nil {
		img, err = mutate.ConfigFile(img, cf)
	}
	if err != nil {
		layer.remove()
		return nil, nil, fmt.Errorf("image of %s: %w", runtimeName, err)
	}
	return img, layer, nil
}

// resolveForPush resolves what Push and Export pack: a runtime, or a
// catalog image by its name (its tree, and no runtime).
func (s *Store) resolveForPush(name string) (Resolved, error) {
	if _, ok := s.cat.image(name); !ok {
		return s.Resolve(name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshQuietlyLocked()
	m := s.currentImageLocked(name, true)
	if m == nil {
		img, _ := s.cat.image(name)
		return Resolved{}, fmt.Errorf("name: catalog image %s (recipe %s) is not in the store: build it (scratchrun images build %s) or pull it", name, shortHash(recipeHash(img)), name)
	}
	return Resolved{RootFS: filepath.Join(m.dir, "rootfs"), UIDBase: m.UIDBase, ImageDir: m.dir}, nil
}
