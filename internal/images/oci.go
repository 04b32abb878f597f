package images

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Sources of OCI images, as recorded in image.json and reported by List.
const (
	// SourcePull is an image pulled from a registry.
	SourcePull = "pull"
	// SourceDockerArchive is an image imported from a `docker save` archive.
	SourceDockerArchive = "docker-archive"
	// SourceOCILayout is an image imported from an OCI image layout directory.
	SourceOCILayout = "oci-layout"
)

// ociImageName is the image name of every OCI image in the store: their
// directories are oci-<digest12>, one per image digest, shared by every
// runtime that runs in it.
const ociImageName = "oci"

// DefaultPlatform is the platform picked from a multi-platform image when
// none is asked for: the only one this host's seccomp filter runs.
const DefaultPlatform = "linux/amd64"

// isOCISource reports whether an image of this source is stored by digest.
func isOCISource(source string) bool {
	return source == SourcePull || source == SourceDockerArchive || source == SourceOCILayout
}

// ociImage is one image chosen from a registry, an archive or a layout.
type ociImage struct {
	img v1.Image
	// digest keys the image in the store: the manifest's digest, or for a
	// docker save archive (which carries no manifest of its own) the
	// config's, the image ID docker shows.
	digest v1.Hash
	// index is the digest of the index the image was chosen from, if any.
	index v1.Hash
	// ref says where it came from, for listings and errors.
	ref      string
	source   string
	platform v1.Platform
	// checkPlatform says the image's config must still be checked
	// against platform (see resolveRemote).
	checkPlatform bool
}

// ImageSelect chooses one image among those a reference, archive or layout
// offers.
type ImageSelect struct {
	// Platform is "os/arch[/variant]"; empty means DefaultPlatform.
	Platform string
	// Tag picks an image of an archive or layout holding several, by its
	// repository tag (docker save) or its org.opencontainers.image.ref.name
	// annotation (layout).
	Tag string
	// Insecure lets a pull use plain HTTP for a registry that is not on
	// loopback or a private network (where HTTP is tried anyway).
	Insecure bool
	// Limits bound the disk storing the image may take.
	Limits PullLimits
}

func (sel ImageSelect) platform() (v1.Platform, error) {
	s := sel.Platform
	if s == "" {
		s = DefaultPlatform
	}
	p, err := v1.ParsePlatform(s)
	if err != nil || p.OS == "" || p.Architecture == "" {
		return v1.Platform{}, fmt.Errorf("platform: %q is not os/arch[/variant], e.g. linux/amd64", s)
	}
	return *p, nil
}

// parseRef parses an image reference the way docker does (docker.io and
// library/ implied).
func parseRef(ref string, insecure bool) (name.Reference, error) {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	r, err := name.ParseReference(ref, opts...)
	if err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	return r, nil
}

// remoteOptions are the registry client's options: credentials from the
// Docker config file (~/.docker/config.json, or $DOCKER_CONFIG/config.json,
// with its credential helpers), and ctx for cancelling.
func remoteOptions(ctx context.Context) []remote.Option {
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithUserAgent("scratchrun"),
	}
}

// resolveRemote fetches ref's manifest (not its layers) and picks the image
// for the platform.
func resolveRemote(ctx context.Context, ref name.Reference, sel ImageSelect) (*ociImage, error) {
	want, err := sel.platform()
	if err != nil {
		return nil, err
	}
	desc, err := remote.Get(ref, remoteOptions(ctx)...)
	if err != nil {
		return nil, registryError(ref, err)
	}
	out := &ociImage{ref: ref.String(), source: SourcePull, platform: want}
	switch {
	case desc.MediaType.IsIndex():
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ref, err)
		}
		out.index = desc.Digest
		out.img, out.digest, out.platform, err = chooseFromIndex(idx, want, ref.String())
		if err != nil {
			return nil, err
		}
	case desc.MediaType.IsSchema1():
		return nil, fmt.Errorf("%s: a Docker schema 1 image, which is not supported (push it again with a current docker or crane)", ref)
	default:
		out.img, err = desc.Image()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ref, err)
		}
		out.digest = desc.Digest
		// Its platform is in its config, a download the store skips
		// when it holds this digest already.
		out.checkPlatform = true
	}
	return out, nil
}

// registryError says what went wrong talking to a registry in the words an
// operator needs: which reference, and for a refused login where the
// credentials come from.
func registryError(ref name.Reference, err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) {
		switch terr.StatusCode {
		case 401, 403:
			return fmt.Errorf("%s: the registry refused access (%d): log in with `docker login %s` or put credentials in $DOCKER_CONFIG/config.json: %w",
				ref, terr.StatusCode, ref.Context().RegistryStr(), err)
		case 404:
			return fmt.Errorf("%s: no such image in the registry (manifest unknown): %w", ref, err)
		}
	}
	return fmt.Errorf("%s: %w", ref, err)
}

// chooseFromIndex picks the image for want from an index, descending into
// nested indexes; attestations and other artifacts without a platform are
// never chosen.
func chooseFromIndex(idx v1.ImageIndex, want v1.Platform, what string) (v1.Image, v1.Hash, v1.Platform, error) {
	var offered []string
	img, digest, got, err := searchIndex(idx, want, &offered, 0)
	if err != nil {
		return nil, v1.Hash{}, v1.Platform{}, fmt.Errorf("%s: %w", what, err)
	}
	if img == nil {
		slices.Sort(offered)
		offered = slices.Compact(offered)
		list := "no image with a platform"
		if len(offered) > 0 {
			list = strings.Join(offered, ", ")
		}
		return nil, v1.Hash{}, v1.Platform{}, fmt.Errorf("platform: %s offers no %s image (it has %s; choose one with --platform)", what, want.String(), list)
	}
	return img, digest, got, nil
}

func searchIndex(idx v1.ImageIndex, want v1.Platform, offered *[]string, depth int) (v1.Image, v1.Hash, v1.Platform, error) {
	if depth > 4 {
		return nil, v1.Hash{}, v1.Platform{}, errors.New("indexes nested more than 4 deep")
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, v1.Hash{}, v1.Platform{}, err
	}
	for _, m := range im.Manifests {
		switch {
		case m.MediaType.IsIndex():
			child, err := idx.ImageIndex(m.Digest)
			if err != nil {
				return nil, v1.Hash{}, v1.Platform{}, err
			}
			img, d, p, err := searchIndex(child, want, offered, depth+1)
			if err != nil || img != nil {
				return img, d, p, err
			}
		case m.MediaType.IsImage() && m.Platform != nil && m.Platform.OS != "unknown":
			*offered = append(*offered, m.Platform.String())
			if m.Platform.Satisfies(want) {
				img, err := idx.Image(m.Digest)
				return img, m.Digest, *m.Platform, err
			}
		case m.MediaType.IsImage() && m.Platform == nil:
			// Layouts often list an image without its platform: its
			// config says.
			img, err := idx.Image(m.Digest)
			if err != nil {
				return nil, v1.Hash{}, v1.Platform{}, err
			}
			cfg, err := img.ConfigFile()
			if err != nil {
				return nil, v1.Hash{}, v1.Platform{}, fmt.Errorf("read image config: %w", err)
			}
			have := v1.Platform{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant}
			*offered = append(*offered, have.String())
			if have.Satisfies(want) {
				return img, m.Digest, have, nil
			}
		}
	}
	return nil, v1.Hash{}, v1.Platform{}, nil
}

// checkPlatform refuses a single-platform image built for another platform
// than want (an image whose config names none is taken as it is).
func checkPlatform(img v1.Image, want v1.Platform, what string) (v1.Platform, error) {
	cfg, err := img.ConfigFile()
	if err != nil {
		return v1.Platform{}, fmt.Errorf("%s: read image config: %w", what, err)
	}
	have := v1.Platform{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant}
	if have.OS == "" || have.Architecture == "" {
		return want, nil
	}
	if !have.Satisfies(want) {
		return v1.Platform{}, fmt.Errorf("platform: %s is a %s image, not %s (choose the platform with --platform)", what, have.String(), want.String())
	}
	return have, nil
}

// ArchiveKind says what a file or directory given to `images import` holds.
type ArchiveKind int

// The kinds ImportKind tells apart.
const (
	// KindRootFS is a root filesystem tarball (docker export, say).
	KindRootFS ArchiveKind = iota
	// KindDockerArchive is a `docker save` archive.
	KindDockerArchive
	// KindOCILayout is an OCI image layout directory.
	KindOCILayout
)

// ImportKind tells a `docker save` archive (a tar with a manifest.json) and
// an OCI image layout (a directory with oci-layout and index.json) from a
// root filesystem tarball.
func ImportKind(path string) (ArchiveKind, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, fmt.Errorf("archive: %w", err)
	}
	if fi.IsDir() {
		if _, err := os.Stat(filepath.Join(path, "oci-layout")); err != nil {
			return 0, fmt.Errorf("archive: %s is a directory but not an OCI image layout (no oci-layout file)", path)
		}
		return KindOCILayout, nil
	}
	// A plain tar is scanned by seeking from header to header, so this
	// costs little even for a large rootfs; a compressed one fails at its
	// first header and is a rootfs (docker save writes plain tars).
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
	if err == nil && len(m) > 0 && m[0].Config != "" {
		return KindDockerArchive, nil
	}
	return KindRootFS, nil
}

// openDockerArchive picks the image of a `docker save` archive: the only
// one, or the one tagged sel.Tag.
func openDockerArchive(path string, sel ImageSelect) (*ociImage, error) {
	var tag *name.Tag
	if sel.Tag != "" {
		t, err := name.NewTag(sel.Tag)
		if err != nil {
			return nil, fmt.Errorf("tag: %w", err)
		}
		tag = &t
	}
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
	if err != nil {
		return nil, fmt.Errorf("archive %s: %w", path, err)
	}
	if tag == nil && len(m) > 1 {
		var tags []string
		for _, d := range m {
			tags = append(tags, d.RepoTags...)
		}
		return nil, fmt.Errorf("tag: archive %s holds %d images: name one with --tag (%s)", path, len(m), strings.Join(tags, ", "))
	}
	img, err := tarball.ImageFromPath(path, tag)
	if err != nil {
		return nil, fmt.Errorf("archive %s: %w", path, err)
	}
	digest, err := img.ConfigName()
	if err != nil {
		return nil, fmt.Errorf("archive %s: %w", path, err)
	}
	want, err := sel.platform()
	if err != nil {
		return nil, err
	}
	got, err := checkPlatform(img, want, path)
	if err != nil {
		return nil, err
	}
	ref := path
	if sel.Tag != "" {
		ref += ":" + sel.Tag
	} else if len(m[0].RepoTags) > 0 {
		ref = m[0].RepoTags[0]
	}
	return &ociImage{img: img, digest: digest, ref: ref, source: SourceDockerArchive, platform: got}, nil
}

// refNameAnnotation names an image of an OCI layout.
const refNameAnnotation = "org.opencontainers.image.ref.name"

// openLayout picks the image of an OCI image layout for the platform (and,
// when given, the tag in its org.opencontainers.image.ref.name annotation).
func openLayout(dir string, sel ImageSelect) (*ociImage, error) {
	want, err := sel.platform()
	if err != nil {
		return nil, err
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("layout %s: %w", dir, err)
	}
	if sel.Tag != "" {
		im, err := idx.IndexManifest()
		if err != nil {
			return nil, fmt.Errorf("layout %s: %w", dir, err)
		}
		var names []string
		found := false
		for _, m := range im.Manifests {
			n := m.Annotations[refNameAnnotation]
			names = append(names, n)
			if n != sel.Tag {
				continue
			}
			found = true
			if m.MediaType.IsIndex() {
				if idx, err = idx.ImageIndex(m.Digest); err != nil {
					return nil, fmt.Errorf("layout %s: %w", dir, err)
				}
				break
			}
			img, err := idx.Image(m.Digest)
			if err != nil {
				return nil, fmt.Errorf("layout %s: %w", dir, err)
			}
			got, err := checkPlatform(img, want, dir)
			if err != nil {
				return nil, err
			}
			return &ociImage{img: img, digest: m.Digest, ref: dir + ":" + sel.Tag, source: SourceOCILayout, platform: got}, nil
		}
		if !found {
			return nil, fmt.Errorf("tag: layout %s has no image named %q (it has %q)", dir, sel.Tag, names)
		}
	}
	ref := dir
	if sel.Tag != "" {
		ref += ":" + sel.Tag
	}
	img, digest, got, err := chooseFromIndex(idx, want, "layout "+dir)
	if err != nil {
		return nil, err
	}
	return &ociImage{img: img, digest: digest, ref: ref, source: SourceOCILayout, platform: got}, nil
}
