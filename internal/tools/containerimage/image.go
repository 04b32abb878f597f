package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// binDir is where the binaries go: the engine finds scratchrun-spawn and
// scratchrun-init next to its own executable, and this is where
// scripts/install.sh puts them on a host.
const binDir = "/usr/local/bin"

// binaries are the files the image must hold in binDir, all three from
// one build (the engine refuses a helper of another protocol version).
var binaries = []string{"scratchrun", "scratchrun-init", "scratchrun-spawn"}

// mcpServerName is the image's label io.modelcontextprotocol.server.name:
// the MCP Registry lists an OCI package only when the image carries the
// name of the server.json that lists it (packaging/server.json).
const mcpServerName = "io.github.scratchrun/scratchrun"

// entrypoint and defaultCmd: `podman run IMAGE` serves the HTTP API,
// `podman run IMAGE worker --nats=...` is a cluster's worker.
var (
	entrypoint = []string{binDir + "/scratchrun"}
	defaultCmd = []string{"serve"}
)

// options are one build's inputs.
type options struct {
	base, binDir, out, ref    string
	version, revision, source string
	created                   time.Time
}

func run(o options) error {
	img, err := buildImage(o)
	if err != nil {
		return err
	}
	return writeArchive(img, o.ref, o.created, o.out)
}

// buildImage makes the image: the base as one layer, the binaries as a
// second (so that a new build of the binaries on the same base shares the
// base's layer), and a config with the entrypoint and the OCI labels.
func buildImage(o options) (v1.Image, error) {
	base, err := tarball.LayerFromFile(o.base, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("base layer: %w", err)
	}
	bin, err := binLayer(o.binDir, o.created)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{
		"org.opencontainers.image.title":      "scratchrun",
		"org.opencontainers.image.version":    o.version,
		"org.opencontainers.image.created":    o.created.Format(time.RFC3339),
		"io.modelcontextprotocol.server.name": mcpServerName,
	}
	if o.revision != "" {
		labels["org.opencontainers.image.revision"] = o.revision
	}
	if o.source != "" {
		labels["org.opencontainers.image.source"] = o.source
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: "amd64",
		OS:           "linux",
		Config: v1.Config{
			Entrypoint: entrypoint,
			Cmd:        defaultCmd,
			Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			Labels:     labels,
			WorkingDir: "/",
			// The engine drains on SIGTERM: runs finish, then it exits 0.
			StopSignal: "SIGTERM",
		},
	})
	if err != nil {
		return nil, err
	}
	at := v1.Time{Time: o.created}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: at, CreatedBy: "mmdebstrap (scripts/container-image.sh)"}},
		mutate.Addendum{Layer: bin, History: v1.History{Created: at, CreatedBy: "scratchrun binaries into " + binDir}})
	if err != nil {
		return nil, err
	}
	img, err = mutate.CreatedAt(img, at)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, labels).(v1.Image), nil
}

// binLayer is the layer holding the binaries, each mode 0755 and owned by
// root, and nothing else of dir.
func binLayer(dir string, mtime time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"usr/", "usr/local/", "usr/local/bin/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	for _, name := range slices.Sorted(slices.Values(binaries)) {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("binaries: %w", err)
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: binDir[1:] + "/" + name, Mode: 0o755, Size: int64(len(data)), ModTime: mtime, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
}
