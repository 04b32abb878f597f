package images

import (
	"archive/tar"
	"bytes"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// testRegistry is go-containerregistry's registry, served on loopback, with
// what the tests need around it: it counts blob downloads, can corrupt a
// blob on its way out, and can require a login.
type testRegistry struct {
	t    *testing.T
	srv  *httptest.Server
	h    http.Handler
	host string

	mu       sync.Mutex
	blobGets int
	corrupt  map[string]bool // blob digests ("sha256:...") served with a byte flipped
	user     string          // when set, every request needs basic auth with pass
	pass     string
}

func newTestRegistry(t *testing.T) *testRegistry {
	r := &testRegistry{t: t, h: registry.New(registry.Logger(log.New(io.Discard, "", 0))), corrupt: map[string]bool{}}
	r.srv = httptest.NewServer(r)
	t.Cleanup(r.srv.Close)
	r.host = strings.TrimPrefix(r.srv.URL, "http://")
	return r
}

func (r *testRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	user, pass := r.user, r.pass
	isBlob := req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/sha256:")
	corrupt := false
	if isBlob {
		r.blobGets++
		corrupt = r.corrupt[req.URL.Path[strings.LastIndex(req.URL.Path, "/")+1:]]
	}
	r.mu.Unlock()
	if user != "" {
		if u, p, ok := req.BasicAuth(); !ok || u != user || p != pass {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"log in"}]}`, http.StatusUnauthorized)
			return
		}
	}
	if !corrupt {
		r.h.ServeHTTP(w, req)
		return
	}
	rec := httptest.NewRecorder()
	r.h.ServeHTTP(rec, req)
	body := rec.Body.Bytes()
	if len(body) > 0 {
		body[len(body)/2] ^= 0xff
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(body)
}

func (r *testRegistry) blobDownloads() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.blobGets
}

func (r *testRegistry) ref(repoTag string) string { return r.host + "/" + repoTag }

func (r *testRegistry) pushOptions() []remote.Option {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.user == "" {
		return nil
	}
	return []remote.Option{remote.WithAuth(&authn.Basic{Username: r.user, Password: r.pass})}
}

// push uploads img as repoTag and returns its manifest digest.
func (r *testRegistry) push(repoTag string, img v1.Image) v1.Hash {
	r.t.Helper()
	ref, err := name.ParseReference(r.ref(repoTag))
	if err != nil {
		r.t.Fatal(err)
	}
	if err := remote.Write(ref, img, r.pushOptions()...); err != nil {
		r.t.Fatalf("push %s: %v", repoTag, err)
	}
	d, err := img.Digest()
	if err != nil {
		r.t.Fatal(err)
	}
	return d
}

// pushIndex uploads idx as repoTag and returns its digest.
func (r *testRegistry) pushIndex(repoTag string, idx v1.ImageIndex) v1.Hash {
	r.t.Helper()
	ref, err := name.ParseReference(r.ref(repoTag))
	if err != nil {
		r.t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx, r.pushOptions()...); err != nil {
		r.t.Fatalf("push index %s: %v", repoTag, err)
	}
	d, err := idx.Digest()
	if err != nil {
		r.t.Fatal(err)
	}
	return d
}

// testImage builds an image of one layer per entry list, for platform
// ("os/arch"), with cfg as its config.
func testImage(t *testing.T, platform string, cfg v1.Config, layers ...[]tarEntry) v1.Image {
	t.Helper()
	var ls []v1.Layer
	for _, entries := range layers {
		data := buildTar(t, entries)
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	img, err := mutate.AppendLayers(empty.Image, ls...)
	if err != nil {
		t.Fatal(err)
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

// testIndex puts images in an index, each with its config's platform.
func testIndex(t *testing.T, imgs ...v1.Image) v1.ImageIndex {
	t.Helper()
	var adds []mutate.IndexAddendum
	for _, img := range imgs {
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}}})
	}
	return mutate.AppendManifests(empty.Index, adds...)
}

// programLayer is the smallest rootfs a runtime can be registered on: an
// executable /bin/sh (never run by these tests) and /etc.
var programLayer = []tarEntry{
	{name: "bin/", typ: tar.TypeDir, mode: 0o755},
	{name: "bin/sh", typ: tar.TypeReg, mode: 0o755, body: "#!not really a shell\n"},
	{name: "etc/", typ: tar.TypeDir, mode: 0o755},
}

var shSpec = RuntimeSpec{Command: []string{"/bin/sh", "{file}"}, File: "main.sh"}

func specNamed(name string) RuntimeSpec {
	sp := shSpec
	sp.Name = name
	return sp
}
