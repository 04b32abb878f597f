package images

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/scratchrun/scratchrun/internal/images/layertar"
)

// DefaultRoot is the store's root directory when Options.Root is empty.
const DefaultRoot = "/var/lib/scratchrun"

// DefaultUIDBase is the host uid (and gid) that owns an image's root-owned
// files when Options.UIDBase is zero. A root engine's sandboxes do not run
// as these uids (they would own the store): they see the image through an
// idmapped view that shows it as their own (package idmap).
const DefaultUIDBase uint32 = 1000000000

// Image sources, as recorded in image.json and reported by List.
const (
	SourceMmdebstrap = "mmdebstrap"
	SourceImport     = "import"
)

// Options configure a Store.
type Options struct {
	// Root is the state directory; empty means DefaultRoot.
	Root string
	// UIDBase is added to every uid and gid of an image's files when
	// running as root; zero means DefaultUIDBase. When not running as
	// root it is ignored and files belong to the caller.
	UIDBase uint32
}

// Store is the on-disk image store plus the runtime catalog. Its methods
// are safe for concurrent use; builds, imports and prunes of several
// processes are serialised by a lock file.
type Store struct {
	root        string
	imagesDir   string
	runtimesDir string
	shift       layertar.Shift
	cat         *catalog

	mu       sync.Mutex
	images   []imageMeta        // what is on disk, as last scanned
	imported map[string]Runtime // runtimes.d, as last scanned
	aliases  map[string]string  // aliases.json, as last scanned
}

// imageMeta is image.json, written next to each rootfs.
type imageMeta struct {
	Name         string       `json:"name"`
	RecipeHash   string       `json:"recipe_hash"`
	Recipe       *imageRecipe `json:"recipe,omitempty"`
	Suite        string       `json:"suite,omitempty"`
	Created      time.Time    `json:"created"`
	SizeBytes    int64        `json:"size_bytes"`
	UIDBase      uint32       `json:"uid_base"`
	Source       string       `json:"source"`
	BuildSeconds float64      `json:"build_seconds,omitempty"`
	Tarball      string       `json:"tarball,omitempty"`
	// For OCI images (Source SourcePull, SourceDockerArchive or
	// SourceOCILayout): where the image came from, its digest (the store's
	// key for it), the index it was chosen from, its platform and what its
	// config says.
	Ref         string    `json:"ref,omitempty"`
	Digest      string    `json:"digest,omitempty"`
	IndexDigest string    `json:"index_digest,omitempty"`
	Platform    string    `json:"platform,omitempty"`
	Config      ociConfig `json:"config,omitzero"`
	// SetIDFree says no file of the image has a set-id bit: written
	// without (fileMode) or stripped since (stripSetIDOnOpen). An image
	// without it is not used.
	SetIDFree bool `json:"setid_free,omitempty"`

	dir string // the image directory; not stored
}

// OpenStore opens (creating directories as needed) the store under
// opts.Root and loads the built-in catalog and the imported runtimes.
func OpenStore(opts Options) (*Store, error) {
	root := opts.Root
	if root == "" {
		root = DefaultRoot
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("Root: %w", err)
	}
	base := opts.UIDBase
	if base == 0 {
		base = DefaultUIDBase
	}
	if uint64(base)+layertar.IDRange-1 > math.MaxUint32-1 {
		return nil, fmt.Errorf("UIDBase: %d leaves no room for %d ids below 2^32-1", base, layertar.IDRange)
	}
	cat, err := builtinCatalog()
	if err != nil {
		return nil, err
	}
	s := &Store{
		root:        root,
		imagesDir:   filepath.Join(root, "images"),
		runtimesDir: filepath.Join(root, "runtimes.d"),
		shift:       layertar.Shift{Chown: os.Geteuid() == 0, Base: base},
		cat:         cat,
	}
	// 0755: the sandbox's root (a shifted uid) must be able to reach
	// the rootfs when overlayfs is mounted from inside its namespace, and
	// so must ordinary users' rootless engines, which run root's images.
	for _, d := range []string{root, s.imagesDir, s.runtimesDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create store directory: %w", err)
		}
	}
	if err := s.stripSetIDOnOpen(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.refreshLocked(); err != nil {
		return nil, err
	}
	return s, nil
}

// Root returns the store's root directory.
func (s *Store) Root() string { return s.root }

// uidBase is the host uid owning the image's root files: the configured
// base as root, the caller's uid otherwise (nothing is chowned then).
func (s *Store) uidBase() uint32 {
	if s.shift.Chown {
		return s.shift.Base
	}
	return uint32(os.Geteuid())
}

// refreshLocked rescans image directories and runtimes.d, so that builds,
// imports and prunes done by other processes become visible.
func (s *Store) refreshLocked() error {
	entries, err := os.ReadDir(s.imagesDir)
	if err != nil {
		return fmt.Errorf("scan images: %w", err)
	}
	var images []imageMeta
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		dir := filepath.Join(s.imagesDir, e.Name())
		var m imageMeta
		if err := readJSON(filepath.Join(dir, "image.json"), &m); err != nil {
			// Not ours or damaged: leave it alone, but say so.
			slog.Warn("images: ignoring directory without a valid image.json", "dir", dir, "err", err)
			continue
		}
		if e.Name() != m.Name+"-"+shortHash(m.RecipeHash) {
			slog.Warn("images: ignoring image whose directory name does not match image.json", "dir", dir)
			continue
		}
		if !m.SetIDFree {
			slog.Warn("images: ignoring image whose set-id bits may not be stripped (any command of the store's owner, e.g. `scratchrun images list` as root, strips them)", "dir", dir)
			continue
		}
		if isOCISource(m.Source) && (validateDigest(m.Digest) != nil || (m.byDigest() && m.Digest != "sha256:"+m.RecipeHash)) {
			slog.Warn("images: ignoring OCI image whose image.json does not name its digest", "dir", dir)
			continue
		}
		m.dir = dir
		images = append(images, m)
	}
	imported, err := s.loadImported()
	if err != nil {
		return err
	}
	s.images, s.imported, s.aliases = images, imported, s.loadAliases(imported)
	return nil
}

// loadImported reads runtimes.d/<name>.json. A broken or conflicting file
// is skipped with a warning so that one bad file does not take every
// runtime down.
func (s *Store) loadImported() (map[string]Runtime, error) {
	entries, err := os.ReadDir(s.runtimesDir)
	if err != nil {
		return nil, fmt.Errorf("scan runtimes: %w", err)
	}
	out := map[string]Runtime{}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || strings.HasPrefix(name, ".") || e.IsDir() {
			continue
		}
		file := filepath.Join(s.runtimesDir, e.Name())
		var r Runtime
		if err := readJSON(file, &r); err != nil {
			slog.Warn("images: skipping unreadable runtime file", "file", file, "err", err)
			continue
		}
		if err := r.validate(); err != nil {
			slog.Warn("images: skipping invalid runtime file", "file", file, "err", err)
			continue
		}
		if r.Name != name {
			slog.Warn("images: skipping runtime file whose name does not match its runtime", "file", file, "runtime", r.Name)
			continue
		}
		if _, clash := s.cat.runtime(name); clash {
			slog.Warn("images: skipping imported runtime that shadows a catalog runtime", "file", file)
			continue
		}
		out[name] = r
	}
	return out, nil
}

// imageOfLocked returns the image runtime r runs in, or nil if it is not on
// disk: for a catalog runtime the image built from the current recipe, for
// an OCI image the one of its digest, for a rootfs import the newest import
// of its name.
func (s *Store) imageOfLocked(r Runtime, fromCatalog bool) *imageMeta {
	if r.Digest != "" && !fromCatalog {
		for i := range s.images {
			if m := &s.images[i]; m.byDigest() && m.Digest == r.Digest {
				return m
			}
		}
		return nil
	}
	return s.currentImageLocked(r.Image, fromCatalog)
}

// currentImageLocked returns the image of a name, or nil if it is not on
// disk: for a catalog image the one of the current recipe (built here, or
// pulled as that catalog image), for an import the newest import of that
// name.
func (s *Store) currentImageLocked(image string, fromCatalog bool) *imageMeta {
	if fromCatalog {
		img, ok := s.cat.image(image)
		if !ok {
			return nil
		}
		hash := recipeHash(img)
		for i := range s.images {
			m := &s.images[i]
			if m.fromRecipe() && m.Name == image && m.RecipeHash == hash {
				return m
			}
		}
		return nil
	}
	var best *imageMeta
	for i := range s.images {
		m := &s.images[i]
		if m.Source == SourceImport && m.Name == image && (best == nil || m.Created.After(best.Created)) {
			best = m
		}
	}
	return best
}

// isCurrentLocked reports whether m is what its runtimes resolve to: an
// OCI image while some runtime runs in it.
func (s *Store) isCurrentLocked(m *imageMeta) bool {
	if m.byDigest() {
		for _, r := range s.imported {
			if r.Digest == m.Digest {
				return true
			}
		}
		return false
	}
	return s.currentImageLocked(m.Name, m.fromRecipe()) == m
}

// runsInLocked reports whether runtime r runs in an image like m (of its
// name or digest, current or not).
func (s *Store) runsInLocked(r Runtime, m *imageMeta) bool {
	_, fromCatalog := s.cat.runtime(r.Name)
	switch {
	case m.byDigest():
		return !fromCatalog && r.Digest == m.Digest
	case r.Digest != "":
		return false
	}
	return r.Image == m.Name && fromCatalog == m.fromRecipe()
}

// allRuntimesLocked returns catalog and imported runtimes sorted by name.
func (s *Store) allRuntimesLocked() []Runtime {
	var out []Runtime
	for _, r := range s.cat.Runtimes {
		out = append(out, r.clone())
	}
	for _, r := range s.imported {
		out = append(out, r.clone())
	}
	slices.SortFunc(out, func(a, b Runtime) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (s *Store) installedLocked() []Runtime {
	var out []Runtime
	for _, r := range s.allRuntimesLocked() {
		_, fromCatalog := s.cat.runtime(r.Name)
		if s.imageOfLocked(r, fromCatalog) != nil {
			out = append(out, r)
		}
	}
	return out
}

// Catalog returns every runtime known, built or not: the built-in catalog
// and the imported runtimes, sorted by name.
func (s *Store) Catalog() []Runtime {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshQuietlyLocked()
	return s.allRuntimesLocked()
}

// Installed returns the runtimes whose image is on disk (built from the
// current recipe, or imported), sorted by name.
func (s *Store) Installed() []Runtime {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshQuietlyLocked()
	return s.installedLocked()
}

// refreshQuietlyLocked refreshes for methods that cannot return an error;
// on failure the previous view is kept.
func (s *Store) refreshQuietlyLocked() {
	if err := s.refreshLocked(); err != nil {
		slog.Warn("images: rescanning the store failed; using the previous view", "err", err)
	}
}

// Resolved is a runtime ready to run: its entry and the image to run it in.
type Resolved struct {
	Runtime Runtime
	// RootFS is the image's root directory, to be used read-only (as an
	// overlayfs lower layer).
	RootFS string
	// UIDBase is the host uid/gid owning the image's root-owned files;
	// the sandbox must map its uid/gid 0 onto it.
	UIDBase uint32
	// ImageDir holds RootFS and image.json.
	ImageDir string
	// Alias is the name the caller asked for when it was an alias the
	// operator declared for Runtime.Name; empty otherwise.
	Alias string
	// Built says the image is a catalog image built here from Debian's
	// packages (not imported or pulled): the only images whose
	// interpreter a zygote runs outside a sandbox (docs/zygotes.md).
	Built bool
}

// ErrRuntimeNotInstalled is matched (errors.Is) by every Resolve error for
// a runtime that cannot run here, known or not.
var ErrRuntimeNotInstalled = errors.New("runtime not installed")

// ErrUnknownRuntime is matched (errors.Is) by Resolve errors for names
// that are neither in the catalog nor imported.
var ErrUnknownRuntime = errors.New("unknown runtime")

// NotInstalledError is returned by Resolve; its message lists the
// installed runtimes and says how to get the missing one.
type NotInstalledError struct {
	// Runtime is the name asked for.
	Runtime string
	// AliasOf is the runtime Runtime is an alias of, if it is one.
	AliasOf string
	// Digest is the missing OCI image's digest, for a pulled or imported
	// image.
	Digest string
	// Known is true when the runtime is in the catalog or imported
	// but its image is not on disk.
	Known bool
	// Image and RecipeHash name the missing image (RecipeHash is empty
	// for imports).
	Image, RecipeHash string
	// Installed lists the runtimes that can run now.
	Installed []string
	// Buildable lists catalog runtimes that are not installed.
	Buildable []string
}

// Error says what is missing, lists the installed runtimes and says how
// to install the missing one.
func (e *NotInstalledError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "runtime %q is not installed", e.Runtime)
	if e.AliasOf != "" {
		fmt.Fprintf(&b, " (an alias of %s)", e.AliasOf)
	}
	switch {
	case !e.Known:
		b.WriteString(": no such runtime in the catalog or among imported runtimes")
	case e.RecipeHash != "":
		fmt.Fprintf(&b, ": its image %q (recipe %s) has not been built", e.Image, shortHash(e.RecipeHash))
	case e.Digest != "":
		fmt.Fprintf(&b, ": its image %s (%s) is missing", e.Image, e.Digest)
	default:
		fmt.Fprintf(&b, ": its imported image %q is missing", e.Image)
	}
	b.WriteString("; installed runtimes: ")
	if len(e.Installed) == 0 {
		b.WriteString("none")
	} else {
		b.WriteString(strings.Join(e.Installed, ", "))
	}
	name := e.Runtime
	if e.AliasOf != "" {
		name = e.AliasOf
	}
	switch {
	case e.Known && e.RecipeHash != "":
		fmt.Fprintf(&b, " (run `scratchrun images build %s`)", name)
	case e.Known && e.Digest != "":
		b.WriteString(" (pull or import it again with `scratchrun images pull` or `scratchrun images import`)")
	case e.Known:
		b.WriteString(" (import it again with `scratchrun images import`)")
	case len(e.Buildable) > 0:
		fmt.Fprintf(&b, " (run `scratchrun images build` to also install %s)", strings.Join(e.Buildable, ", "))
	}
	return b.String()
}

// Is makes errors.Is match ErrRuntimeNotInstalled always and
// ErrUnknownRuntime for names that are not known at all.
func (e *NotInstalledError) Is(target error) bool {
	return target == ErrRuntimeNotInstalled || (target == ErrUnknownRuntime && !e.Known)
}

// Resolve finds the runtime called name and the image to run it in. A
// malformed name gives an error wrapping ErrInvalidName; a runtime that
// cannot run gives a *NotInstalledError.
func (s *Store) Resolve(name string) (Resolved, error) {
	if err := ValidateName("runtime", name); err != nil {
		return Resolved{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res, err := s.resolveLocked(name)
	if err == nil && res.Alias == "" {
		if _, statErr := os.Stat(res.RootFS); statErr == nil {
			return res, nil
		}
	}
	// Our view may be stale: another process may have built, imported
	// or pruned since we last scanned. An alias is always checked afresh:
	// the operator may have removed it, or added a runtime of its name.
	if err := s.refreshLocked(); err != nil {
		return Resolved{}, err
	}
	return s.resolveLocked(name)
}

func (s *Store) resolveLocked(name string) (Resolved, error) {
	asked, alias := name, ""
	if target, ok := s.aliases[name]; ok {
		alias, name = asked, target
	}
	r, fromCatalog := s.cat.runtime(name)
	known := fromCatalog
	if !fromCatalog {
		r, known = s.imported[name]
	}
	var m *imageMeta
	if known {
		m = s.imageOfLocked(r, fromCatalog)
	}
	if m == nil {
		e := &NotInstalledError{Runtime: asked, Known: known, Image: r.Image, Digest: r.Digest}
		if alias != "" {
			e.AliasOf = name
		}
		if fromCatalog {
			img, _ := s.cat.image(r.Image)
			e.RecipeHash = recipeHash(img)
		}
		for _, ir := range s.installedLocked() {
			e.Installed = append(e.Installed, ir.Name)
		}
		for _, cr := range s.cat.Runtimes {
			if !slices.Contains(e.Installed, cr.Name) {
				e.Buildable = append(e.Buildable, cr.Name)
			}
		}
		slices.Sort(e.Buildable)
		return Resolved{}, e
	}
	return Resolved{
		Runtime:  r.clone(),
		RootFS:   filepath.Join(m.dir, "rootfs"),
		UIDBase:  m.UIDBase,
		ImageDir: m.dir,
		Alias:    alias,
		Built:    fromCatalog && m.Source == SourceMmdebstrap,
	}, nil
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	return nil
}

// writeJSONAtomic writes v to path through a temporary file in the same
// directory and a rename, so readers never see a half-written file.
func writeJSONAtomic(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // no-op after a successful rename
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
