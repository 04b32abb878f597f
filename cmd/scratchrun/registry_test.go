package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/scratchrun/scratchrun/internal/images"
)

// loopbackRegistry is go-containerregistry's registry on loopback; it counts
// blob downloads and can serve one blob corrupted.
type loopbackRegistry struct {
	t    *testing.T
	srv  *httptest.Server
	h    http.Handler
	host string

	mu       sync.Mutex
	blobGets int
	corrupt  string // a blob digest served with a byte flipped
}

func newLoopbackRegistry(t *testing.T) *loopbackRegistry {
	r := &loopbackRegistry{t: t, h: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	r.srv = httptest.NewServer(r)
	t.Cleanup(r.srv.Close)
	r.host = strings.TrimPrefix(r.srv.URL, "http://")
	return r
}

func (r *loopbackRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	corrupt := false
	if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/") {
		r.blobGets++
		corrupt = r.corrupt != "" && strings.HasSuffix(req.URL.Path, "/"+r.corrupt)
	}
	r.mu.Unlock()
	if !corrupt {
		r.h.ServeHTTP(w, req)
		return
	}
	rec := httptest.NewRecorder()
	r.h.ServeHTTP(rec, req)
	body := rec.Body.Bytes()
	body[len(body)/2] ^= 0xff
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(body)
}

func (r *loopbackRegistry) blobs() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.blobGets
}

func (r *loopbackRegistry) ref(repoTag string) string { return r.host + "/" + repoTag }

func (r *loopbackRegistry) push(repoTag string, img v1.Image) {
	r.t.Helper()
	ref, err := name.ParseReference(r.ref(repoTag))
	if err == nil {
		err = remote.Write(ref, img)
	}
	if err != nil {
		r.t.Fatalf("push %s: %v", repoTag, err)
	}
}

func (r *loopbackRegistry) pushIndex(repoTag string, imgs ...v1.Image) {
	r.t.Helper()
	var adds []mutate.IndexAddendum
	for _, img := range imgs {
		cf, err := img.ConfigFile()
		if err != nil {
			r.t.Fatal(err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: cf.Platform()}})
	}
	ref, err := name.ParseReference(r.ref(repoTag))
	if err == nil {
		err = remote.WriteIndex(ref, mutate.AppendManifests(empty.Index, adds...))
	}
	if err != nil {
		r.t.Fatalf("push index %s: %v", repoTag, err)
	}
}

// layerEntry is one entry of a layer a test builds.
type layerEntry struct {
	name     string
	typ      byte
	mode     int64
	uid, gid int
	body     []byte
	link     string
}

func layerTar(t *testing.T, entries []layerEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Uid: e.uid, Gid: e.gid, Linkname: e.link, Format: tar.FormatPAX}
		if e.typ == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		tw.Write(e.body)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ociImage builds an image for platform ("os/arch[/variant]") from layers,
// with cfg as its config.
func ociImage(t *testing.T, platform string, cfg v1.Config, layers ...[]layerEntry) v1.Image {
	t.Helper()
	img := empty.Image
	for _, entries := range layers {
		data := layerTar(t, entries)
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			t.Fatal(err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	p, err := v1.ParsePlatform(platform)
	if err != nil {
		t.Fatal(err)
	}
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Config = cfg
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// projectRootfsLayer is a base layer taken from the project's own image (the
// bash runtime's): bash, cat, ls and id with the libraries they load, laid
// out merged-/usr as Debian does, and an /etc with root and one user; with
// python, Python 3.13 and its standard library too.
func projectRootfsLayer(t *testing.T, python ...bool) []layerEntry {
	t.Helper()
	store, err := images.OpenStore(images.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := store.Resolve("bash")
	if err != nil {
		t.Fatalf("the bash image must be built for these tests: %v", err)
	}
	root := res.RootFS
	entries := []layerEntry{
		{name: "usr/", typ: tar.TypeDir, mode: 0o755},
		{name: "usr/bin/", typ: tar.TypeDir, mode: 0o755},
		{name: "usr/lib/", typ: tar.TypeDir, mode: 0o755},
		{name: "usr/lib/x86_64-linux-gnu/", typ: tar.TypeDir, mode: 0o755},
		{name: "usr/lib64/", typ: tar.TypeDir, mode: 0o755},
		{name: "bin", typ: tar.TypeSymlink, link: "usr/bin"},
		{name: "lib", typ: tar.TypeSymlink, link: "usr/lib"},
		{name: "lib64", typ: tar.TypeSymlink, link: "usr/lib64"},
		{name: "usr/lib64/ld-linux-x86-64.so.2", typ: tar.TypeSymlink, link: "../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"},
		{name: "etc/", typ: tar.TypeDir, mode: 0o755},
		{name: "etc/passwd", typ: tar.TypeReg, mode: 0o644, body: []byte("root:x:0:0:root:/root:/bin/bash\napp:x:1000:1000:app:/home/app:/bin/bash\n")},
		{name: "etc/group", typ: tar.TypeReg, mode: 0o644, body: []byte("root:x:0:\napp:x:1000:\n")},
		{name: "root/", typ: tar.TypeDir, mode: 0o700},
	}
	added := map[string]bool{}
	var addFile func(rel string)
	addFile = func(rel string) {
		if added[rel] {
			return
		}
		added[rel] = true
		host := resolveIn(t, root, rel)
		data, err := os.ReadFile(host)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, layerEntry{name: rel, typ: tar.TypeReg, mode: 0o755, body: data})
		f, err := elf.Open(host)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		libs, _ := f.ImportedLibraries()
		f.Close()
		for _, lib := range libs {
			addFile("usr/lib/x86_64-linux-gnu/" + lib)
		}
	}
	addFile("usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
	for _, bin := range []string{"bash", "cat", "ls", "id"} {
		addFile("usr/bin/" + bin)
	}
	if len(python) > 0 && python[0] {
		addFile("usr/bin/python3.13")
		entries = append(entries, addTree(t, root, "usr/lib/python3.13")...)
	}
	return entries
}

// addTree adds the tree at rel under root (directories, files, symlinks as
// they are), skipping compiled caches.
func addTree(t *testing.T, root, rel string) []layerEntry {
	t.Helper()
	var out []layerEntry
	err := filepath.WalkDir(filepath.Join(root, rel), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name, _ := filepath.Rel(root, p)
		switch {
		case d.IsDir() && d.Name() == "__pycache__":
			return filepath.SkipDir
		case d.IsDir():
			out = append(out, layerEntry{name: name + "/", typ: tar.TypeDir, mode: 0o755})
		case d.Type()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out = append(out, layerEntry{name: name, typ: tar.TypeSymlink, link: target})
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out = append(out, layerEntry{name: name, typ: tar.TypeReg, mode: 0o644, body: data})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// resolveIn follows the symlinks of rel inside root, as the sandbox would.
func resolveIn(t *testing.T, root, rel string) string {
	t.Helper()
	for range 16 {
		p := filepath.Join(root, rel)
		target, err := os.Readlink(p)
		if err != nil {
			return p
		}
		if path.IsAbs(target) {
			rel = strings.TrimPrefix(target, "/")
		} else {
			rel = path.Join(path.Dir(rel), target)
		}
	}
	t.Fatalf("%s: too many symlinks", rel)
	return ""
}
