package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// A build from a small base and fake binaries gives an OCI archive whose
// layout names the image, whose config has the entrypoint, the default
// command and the labels, whose layers are the base and the binaries
// (mode 0755, in /usr/local/bin), and which is the same, byte for byte,
// when built again from the same inputs.
func TestArchive(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "base.tar")
	writeTar(t, base, map[string]string{"etc/os-release": "ID=debian\n"})
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	for _, b := range binaries {
		os.WriteFile(filepath.Join(bin, b), []byte("binary "+b), 0o700)
	}
	o := options{base: base, binDir: bin, ref: "localhost/scratchrun:v1", version: "v1", revision: "abc", source: "https://example.com/src",
		created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	o.out = filepath.Join(dir, "a.oci.tar")
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(o.out)
	o.out = filepath.Join(dir, "b.oci.tar")
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	if second, _ := os.ReadFile(o.out); !bytes.Equal(first, second) {
		t.Error("two builds from the same inputs differ")
	}

	lay := filepath.Join(dir, "layout")
	untar(t, bytes.NewReader(first), lay)
	idx, err := layout.ImageIndexFromPath(lay)
	if err != nil {
		t.Fatal(err)
	}
	im, _ := idx.IndexManifest()
	if len(im.Manifests) != 1 || im.Manifests[0].Annotations[refNameAnnotation] != o.ref || im.Manifests[0].MediaType != types.OCIManifestSchema1 {
		t.Fatalf("index %+v", im.Manifests)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Config
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/scratchrun"}) || !slices.Equal(c.Cmd, []string{"serve"}) || cfg.Architecture != "amd64" ||
		c.Labels["org.opencontainers.image.version"] != "v1" || c.Labels["org.opencontainers.image.revision"] != "abc" ||
		c.Labels["org.opencontainers.image.source"] != o.source || c.Labels["org.opencontainers.image.created"] != "2026-01-02T03:04:05Z" ||
		!cfg.Created.Equal(o.created) || c.Labels["io.modelcontextprotocol.server.name"] != serverJSONName(t) {
		t.Errorf("config %+v", cfg)
	}
	layers, _ := img.Layers()
	if len(layers) != 2 {
		t.Fatalf("%d layers, want the base's and the binaries'", len(layers))
	}
	rc, _ := layers[1].Uncompressed()
	defer rc.Close()
	tr := tar.NewReader(rc)
	var files []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			files = append(files, h.Name)
			if h.Mode != 0o755 || h.Uid != 0 || !h.ModTime.Equal(o.created) {
				t.Errorf("%s: mode %o uid %d time %v", h.Name, h.Mode, h.Uid, h.ModTime)
			}
		}
	}
	if want := []string{"usr/local/bin/scratchrun", "usr/local/bin/scratchrun-init", "usr/local/bin/scratchrun-spawn"}; !slices.Equal(files, want) {
		t.Errorf("the binaries' layer holds %v, want %v", files, want)
	}
}

// A missing binary fails the build and leaves no archive.
func TestMissingBinary(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "base.tar")
	writeTar(t, base, map[string]string{"etc/os-release": "ID=debian\n"})
	o := options{base: base, binDir: dir, out: filepath.Join(dir, "x.oci.tar"), ref: "localhost/scratchrun:v1", version: "v1", created: time.Unix(0, 0)}
	if err := run(o); err == nil {
		t.Fatal("built an image without its binaries")
	}
	if _, err := os.Stat(o.out); !os.IsNotExist(err) {
		t.Errorf("an archive was left: %v", err)
	}
}

func writeTar(t *testing.T, path string, files map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, data := range files {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data))})
		tw.Write([]byte(data))
	}
	tw.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func untar(t *testing.T, r io.Reader, dir string) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			os.MkdirAll(p, 0o755)
			continue
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		data, _ := io.ReadAll(tr)
		os.WriteFile(p, data, 0o644)
	}
}

// serverJSONName is the name packaging/server.json lists the server under,
// which the registry wants in the image's label.
func serverJSONName(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../../packaging/server.json")
	if err != nil {
		t.Fatal(err)
	}
	var s struct{ Name string }
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return s.Name
}
