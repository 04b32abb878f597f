package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/scratchrun/scratchrun/internal/images/layertar"
)

// RuntimeSpec is what an operator says about a runtime made from an OCI
// image: its name and how code runs in it. The image's own config adds to
// Env; the rest of the config is recorded, not used (see ociConfig). What
// the operator leaves empty comes from the spec the image carries, if it
// carries one (RuntimeLabel, as `images push` writes it): a pull of such
// an image needs only a name.
type RuntimeSpec struct {
	// Name is the runtime's name, e.g. "python3.12".
	Name string
	// Command is the argv with FilePlaceholder where the code file goes;
	// its program must exist in the image: an absolute path, or a bare
	// name looked up in the image's PATH (resolveProgram).
	Command []string
	// File is the code file's name, e.g. "main.py".
	File string
	// Env overrides the image's environment for this runtime.
	Env map[string]string
	// Version and Libraries are shown to callers (optional).
	Version   string
	Libraries []string
	// Warm pre-starts the interpreter in warm sandboxes: "python" or "node"
	// with Command[0] as the interpreter; "none" (or empty, when the image
	// says nothing) for none.
	Warm string
	// Preload lists modules a heavy warm sandbox imports (see Runtime).
	Preload []string
}

// runtime turns the spec into the runtime record for an image.
func (sp RuntimeSpec) runtime(ref string, digest v1.Hash, imageEnv map[string]string) (Runtime, error) {
	env := maps.Clone(imageEnv)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, sp.Env)
	r := Runtime{
		Name: sp.Name, Image: ref, Digest: digest.String(),
		Command: slices.Clone(sp.Command), File: sp.File, Env: env,
		Version: sp.Version, Libraries: slices.Clone(sp.Libraries), Preload: slices.Clone(sp.Preload),
	}
	if err := checkPreload(sp.Preload); err != nil {
		return Runtime{}, err
	}
	switch sp.Warm {
	case "", "none":
	case "python", "node":
		if len(sp.Command) == 0 {
			return Runtime{}, errors.New("command: must not be empty")
		}
		flag := "-c"
		if sp.Warm == "node" {
			flag = "-e"
		}
		r.Warm = sp.Warm
		r.WarmCommand = []string{sp.Command[0], flag, BootstrapPlaceholder}
	default:
		return Runtime{}, fmt.Errorf("warm: %q is not python, node or none", sp.Warm)
	}
	if err := r.validate(); err != nil {
		return Runtime{}, err
	}
	return r, nil
}

// check validates what the spec says on its own, before any image is
// fetched: what it leaves empty the image may fill (withImage), and a bare
// program name is looked up in the image later (resolveProgram).
func (sp RuntimeSpec) check() error {
	if len(sp.Command) > 0 && !strings.HasPrefix(sp.Command[0], "/") && !isProgramName(sp.Command[0]) {
		return fmt.Errorf("command: program %q must be an absolute path or a name to look up in the image's PATH", sp.Command[0])
	}
	if len(sp.Command) > 0 && isProgramName(sp.Command[0]) {
		sp.Command = slices.Clone(sp.Command)
		sp.Command[0] = "/" + sp.Command[0]
	}
	if len(sp.Command) == 0 {
		sp.Command = []string{"/bin/placeholder", FilePlaceholder}
	}
	if sp.File == "" {
		sp.File = "placeholder"
	}
	_, err := sp.runtime("ref", v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("0", 64)}, nil)
	return err
}

// filled is the spec with what the image's config says where the operator
// said nothing, checked as check does.
func (sp RuntimeSpec) filled(cfg ociConfig, ref string) (RuntimeSpec, error) {
	full := sp.withImage(cfg.Runtime)
	if len(full.Command) == 0 || full.File == "" {
		return RuntimeSpec{}, fmt.Errorf("command: %s carries no runtime spec (label %s, written by `scratchrun images push`): give --command and --file", ref, RuntimeLabel)
	}
	return full, full.check()
}

// runtimeIn is the runtime spec makes of an image whose tree is rootfs and
// whose config is cfg: the image's own spec under the operator's, its
// environment under the operator's, its program found in the tree.
func (sp RuntimeSpec) runtimeIn(rootfs string, cfg ociConfig, ref string, digest v1.Hash) (Runtime, error) {
	full, err := sp.filled(cfg, ref)
	if err != nil {
		return Runtime{}, err
	}
	pathVar := cfg.Env["PATH"]
	if p, ok := full.Env["PATH"]; ok {
		pathVar = p
	}
	program, err := resolveProgram(rootfs, full.Command[0], pathVar)
	if err != nil {
		return Runtime{}, err
	}
	full.Command = slices.Clone(full.Command)
	full.Command[0] = program
	return full.runtime(ref, digest, cfg.Env)
}

// checkNewSpec checks the spec of a runtime the operator adds from an
// image: its name is free (checkNewRuntimeName) and the spec whole.
func (s *Store) checkNewSpec(spec RuntimeSpec) error {
	if err := s.checkNewRuntimeName(spec.Name); err != nil {
		return err
	}
	return spec.check()
}

// checkNewRuntimeName refuses a name for a runtime the operator adds when
// it belongs to the catalog or to an alias.
func (s *Store) checkNewRuntimeName(name string) error {
	if err := ValidateName("name", name); err != nil {
		return err
	}
	if _, ok := s.cat.runtime(name); ok {
		return fmt.Errorf("name: %q is a catalog runtime; give yours another name", name)
	}
	if _, ok := s.cat.image(name); ok {
		return fmt.Errorf("name: %q is a catalog image; give yours another name", name)
	}
	s.mu.Lock()
	s.refreshQuietlyLocked()
	target, isAlias := s.aliases[name]
	s.mu.Unlock()
	if isAlias {
		return fmt.Errorf("name: %q is an alias of %s; remove the alias first (scratchrun images alias --remove %s)", name, target, name)
	}
	return nil
}

// Pull fetches the image ref from its registry (the platform's image of a
// multi-platform one), stores it by digest and registers the runtime spec
// describes. An image already stored under the same digest is not fetched
// again: a reference by digest then needs no network at all, one by tag only
// its manifest. Nothing is stored when any step fails. A catalog name (a
// catalog image, or a catalog runtime standing for its image) stores the
// image as that catalog image instead, when it is one (pullCatalog).
func (s *Store) Pull(ctx context.Context, ref string, spec RuntimeSpec, sel ImageSelect, progress io.Writer) error {
	if progress == nil {
		progress = io.Discard
	}
	if recipe, ok := s.catalogImageNamed(spec.Name); ok {
		return s.pullCatalog(ctx, ref, spec, recipe, sel, progress)
	}
	if err := s.checkNewSpec(spec); err != nil {
		return err
	}
	return fetchThen(ctx, ref, sel, progress, func(img *ociImage) error {
		return s.addOCIRuntime(ctx, img, spec, sel.Limits, progress)
	})
}

// fetchThen resolves ref for sel's platform and hands the image to add. A
// reference by digest is first handed over without its image (before any
// network): add answers errNotStored when the store does not hold that
// digest, and only then is the registry asked.
func fetchThen(ctx context.Context, ref string, sel ImageSelect, progress io.Writer, add func(*ociImage) error) error {
	want, err := sel.platform()
	if err != nil {
		return err
	}
	r, err := parseRef(ref, sel.Insecure)
	if err != nil {
		return err
	}
	if d, ok := r.(name.Digest); ok {
		err := add(&ociImage{digest: parseDigest(d.DigestStr()), ref: r.String(), platform: want})
		if !errors.Is(err, errNotStored) {
			return err
		}
	}
	fmt.Fprintf(progress, "resolving %s for %s ...\n", r, want.String())
	img, err := resolveRemote(ctx, r, sel)
	if err != nil {
		return err
	}
	return add(img)
}

// errNotStored says a pull by digest must fetch after all.
var errNotStored = errors.New("image not in the store")

// parseDigest parses a digest that name.ParseReference has already checked.
func parseDigest(d string) v1.Hash {
	h, err := v1.NewHash(d)
	if err != nil {
		return v1.Hash{}
	}
	return h
}

// ImportImage stores the image of a `docker save` archive or an OCI image
// layout directory (see ImportKind) and registers the runtime spec
// describes, as Pull does (a catalog name too).
func (s *Store) ImportImage(ctx context.Context, path string, spec RuntimeSpec, sel ImageSelect, progress io.Writer) error {
	if progress == nil {
		progress = io.Discard
	}
	recipe, catalogName := s.catalogImageNamed(spec.Name)
	if catalogName {
		if err := checkCatalogSpec(spec, recipe); err != nil {
			return err
		}
	} else if err := s.checkNewSpec(spec); err != nil {
		return err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	kind, err := ImportKind(abs)
	if err != nil {
		return err
	}
	var img *ociImage
	switch kind {
	case KindDockerArchive:
		img, err = openDockerArchive(abs, sel)
	case KindOCILayout:
		img, err = openLayout(abs, sel)
	default:
		return fmt.Errorf("archive: %s is neither a docker save archive nor an OCI image layout", abs)
	}
	if err != nil {
		return err
	}
	if catalogName {
		return s.addCatalogImage(ctx, img, spec.Name, recipe, sel.Limits, progress)
	}
	return s.addOCIRuntime(ctx, img, spec, sel.Limits, progress)
}

// storedByDigest finds an OCI image stored under digest, or chosen for
// platform from the index of that digest.
func (s *Store) storedByDigest(digest string, platform v1.Platform) *imageMeta {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshQuietlyLocked()
	for i := range s.images {
		m := &s.images[i]
		if !m.byDigest() || m.UIDBase != s.uidBase() {
			continue
		}
		if m.Digest == digest {
			if p, err := v1.ParsePlatform(m.Platform); err == nil && p.OS != "" && !p.Satisfies(platform) {
				return nil // the same image, but not for this platform: refused when fetched
			}
			return m
		}
		if m.IndexDigest == digest && m.Platform != "" {
			if p, err := v1.ParsePlatform(m.Platform); err == nil && p.Satisfies(platform) {
				return m
			}
		}
	}
	return nil
}

// addOCIRuntime stores img unless the store holds its digest already, and
// writes the runtime file, all under the store lock. An img without an image
// (a pull by digest, before any network) is only looked up: errNotStored
// when it is not there.
func (s *Store) addOCIRuntime(ctx context.Context, img *ociImage, spec RuntimeSpec, limits PullLimits, progress io.Writer) error {
	unlock, err := s.lockToWrite(ctx, progress)
	if err != nil {
		return err
	}
	defer unlock()
	stored := s.storedByDigest(img.digest.String(), img.platform)
	switch {
	case stored != nil:
		fmt.Fprintf(progress, "image %s is in the store already: nothing to download\n", img.digest)
	case img.img == nil:
		return errNotStored
	default:
		if stored, err = s.storeOCI(ctx, img, spec.byDigest(img), limits, progress); err != nil {
			return err
		}
	}
	digest, err := v1.NewHash(stored.Digest)
	if err != nil {
		return fmt.Errorf("image %s: %w", stored.dir, err)
	}
	// The runtime names the reference it was added from, which may differ
	// from the one the shared image was first stored under.
	rt, err := spec.runtimeIn(filepath.Join(stored.dir, "rootfs"), stored.Config, img.ref, digest)
	if err != nil {
		return err
	}
	for _, line := range stored.Config.notTaken() {
		fmt.Fprintf(progress, "image config: %s\n", line)
	}
	if err := writeJSONAtomic(filepath.Join(s.runtimesDir, rt.Name+".json"), rt); err != nil {
		return fmt.Errorf("write runtime %s: %w", rt.Name, err)
	}
	s.mu.Lock()
	s.refreshQuietlyLocked()
	s.mu.Unlock()
	fmt.Fprintf(progress, "runtime %s runs %s in %s (%s)\n", rt.Name, strings.Join(rt.Command, " "), rt.Image, stored.Digest)
	return nil
}

// ociTarget says what an OCI image is stored as: its image name and key
// (image.json's name and recipe_hash; the directory is name-key12), what
// its config must say before any layer is fetched, and what its tree must
// hold before it is put in place.
type ociTarget struct {
	name, key   string
	checkConfig func(cfg ociConfig) error
	checkTree   func(rootfs string, cfg ociConfig) error
}

// byDigest is the target of an image a runtime the operator adds runs
// in: stored by its digest, its config and tree making the runtime spec
// describes.
func (sp RuntimeSpec) byDigest(img *ociImage) ociTarget {
	return ociTarget{
		name: ociImageName, key: img.digest.Hex,
		checkConfig: func(cfg ociConfig) error { _, err := sp.filled(cfg, img.ref); return err },
		checkTree: func(rootfs string, cfg ociConfig) error {
			_, err := sp.runtimeIn(rootfs, cfg, img.ref, img.digest)
			return err
		},
	}
}

// storeOCI extracts img's layers into a new image directory, named as
// target says. It is written beside the store under a .tmp- name and
// renamed into place only when every layer was read whole and matched its
// digest, and target's checks passed (for a runtime, that its program,
// command[0], is in it).
func (s *Store) storeOCI(ctx context.Context, img *ociImage, target ociTarget, limits PullLimits, progress io.Writer) (_ *imageMeta, err error) {
	start := time.Now()
	if img.checkPlatform {
		if img.platform, err = checkPlatform(img.img, img.platform, img.ref); err != nil {
			return nil, err
		}
	}
	cfg, err := img.img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("%s: read image config: %w", img.ref, err)
	}
	layers, err := img.img.Layers()
	if err != nil {
		return nil, fmt.Errorf("%s: list layers: %w", img.ref, err)
	}
	config := configMeta(cfg)
	if config.Runtime, err = decodeImageSpec(cfg.Config.Labels); err != nil {
		return nil, fmt.Errorf("%s: %w", img.ref, err)
	}
	if config.Catalog, err = decodeCatalogMark(cfg.Config.Labels); err != nil {
		return nil, fmt.Errorf("%s: %w", img.ref, err)
	}
	// What the image and the operator say must make a runtime before any
	// layer is fetched; its program is looked for once the tree is there.
	if err := target.checkConfig(config); err != nil {
		return nil, err
	}
	if len(cfg.RootFS.DiffIDs) != len(layers) {
		return nil, fmt.Errorf("%s: the config lists %d layers, the manifest %d", img.ref, len(cfg.RootFS.DiffIDs), len(layers))
	}
	fmt.Fprintf(progress, "storing %s (%s, %s): %d layers, uid base %d\n", img.ref, img.platform.String(), img.digest, len(layers), s.uidBase())
	tmp, err := os.MkdirTemp(s.imagesDir, ".tmp-"+target.name+"-")
	if err != nil {
		return nil, fmt.Errorf("create image directory: %w", err)
	}
	defer func() {
		if err != nil {
			removeTree(tmp)
		}
	}()
	rootfs := filepath.Join(tmp, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return nil, err
	}
	budget, err := newPullBudget(limits, s.imagesDir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", img.ref, err)
	}
	// Bottom layer first, into one tree; Bytes of its stats counts files
	// later layers replaced too: treeSize is the image's size.
	lx, err := layertar.New(rootfs, layertar.Options{Shift: s.shift, Layers: true, Charge: budget.addWritten})
	if err != nil {
		return nil, err
	}
	checkBlob := img.source != SourceDockerArchive
	for i, l := range layers {
		if err := s.applyLayer(ctx, lx, l, cfg.RootFS.DiffIDs[i], checkBlob, budget, fmt.Sprintf("layer %d/%d", i+1, len(layers)), progress); err != nil {
			lx.Close()
			return nil, fmt.Errorf("%s: %w", img.ref, err)
		}
	}
	if _, err := lx.Finish(); err != nil {
		return nil, fmt.Errorf("%s: %w", img.ref, err)
	}
	if err := s.ensureMountPoints(rootfs); err != nil {
		return nil, err
	}
	if err := s.ensureIdentity(rootfs); err != nil {
		return nil, err
	}
	// Before the image is in place: an image the runtime cannot run in is
	// not kept.
	if err := target.checkTree(rootfs, config); err != nil {
		return nil, err
	}
	size, err := treeSize(rootfs)
	if err != nil {
		return nil, err
	}
	meta := imageMeta{
		Name:         target.name,
		RecipeHash:   target.key,
		Created:      time.Now().UTC(),
		SizeBytes:    size,
		UIDBase:      s.uidBase(),
		Source:       img.source,
		BuildSeconds: time.Since(start).Seconds(),
		Ref:          img.ref,
		Digest:       img.digest.String(),
		Platform:     img.platform.String(),
		Config:       config,
	}
	if img.index != (v1.Hash{}) {
		meta.IndexDigest = img.index.String()
	}
	final := filepath.Join(s.imagesDir, target.name+"-"+shortHash(target.key))
	if err := s.finishImage(tmp, final, meta); err != nil {
		return nil, err
	}
	meta.dir = final
	fmt.Fprintf(progress, "stored %s in %.1fs: %.0f MB at %s\n", img.ref, meta.BuildSeconds, float64(size)/1e6, final)
	return &meta, nil
}

// applyLayer reads one layer whole, applies it, and checks that what was
// read is what the image says the layer is: its blob's size and digest
// (the manifest's) and its tar stream's digest (the config's diff ID).
// Nothing is taken on trust from the source: a layout's blobs, which the
// client never checks, are read to their end and hashed here too. Only a
// docker save archive's layers, whose digests the client computes from
// the archive's own bytes, are checked by diff ID alone. budget bounds
// what the layer may extract.
func (s *Store) applyLayer(ctx context.Context, lx *layertar.Extractor, l v1.Layer, diffID v1.Hash, checkBlob bool, budget *pullBudget, what string, progress io.Writer) error {
	digest, err := l.Digest()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	size, err := l.Size()
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, digest, err)
	}
	fmt.Fprintf(progress, "  %s %s (%.1f MB) ...\n", what, digest, float64(size)/1e6)
	if diffID.Algorithm != "sha256" {
		return fmt.Errorf("%s %s: diff ID %s is not sha256", what, digest, diffID)
	}
	start := time.Now()
	var stream io.Reader
	finish := func(err error) error { return err }
	release := func() error { return nil }
	if checkBlob {
		blob, err := openLayerBlob(ctx, l)
		if err != nil {
			return fmt.Errorf("%s %s: %w", what, digest, err)
		}
		stream, finish, release = blob.tar, blob.finish, blob.close
	} else {
		rc, err := l.Uncompressed()
		if err != nil {
			return fmt.Errorf("%s %s: %w", what, digest, err)
		}
		stream, release = ctxReader{ctx, rc}, rc.Close
	}
	budget.startLayer(size)
	h := sha256.New()
	counted := &countingHash{h: h}
	r := io.TeeReader(budgetReader{stream, budget.addStream}, counted)
	err = lx.Apply(r)
	if err == nil {
		// The tar's end-of-archive blocks may be followed by padding:
		// the diff ID covers the whole stream, and reading it to its end
		// checks the compressed stream's checksum.
		_, err = io.Copy(io.Discard, r)
	}
	err = finish(err)
	if cerr := release(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, digest, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != diffID.Hex {
		return fmt.Errorf("%s %s: corrupt: its content has digest sha256:%s, the image config says %s", what, digest, got, diffID)
	}
	fmt.Fprintf(progress, "  %s: %.1f MB unpacked in %.1fs\n", what, float64(counted.n)/1e6, time.Since(start).Seconds())
	return nil
}

// countingHash is a hash that also counts what it was fed.
type countingHash struct {
	h hash.Hash
	n int64
}

func (c *countingHash) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.h.Write(p)
}
