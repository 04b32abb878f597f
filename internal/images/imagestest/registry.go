package imagestest

import (
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
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Registry is go-containerregistry's registry, served on loopback, with
// what the tests need around it: it counts blob downloads, can corrupt a
// blob on its way out, and can require a login.
type Registry struct {
	t    testing.TB
	srv  *httptest.Server
	h    http.Handler
	host string

	mu       sync.Mutex
	blobGets int
	corrupt  map[string]bool // blob digests ("sha256:...") served with a byte flipped
	user     string          // when set, every request needs basic auth with pass
	pass     string
	// cutUploads makes every blob upload stop half way: the registry
	// reads part of the body and drops the connection.
	cutUploads bool
}

// NewRegistry starts a registry, stopped when t ends.
func NewRegistry(t testing.TB) *Registry {
	r := &Registry{t: t, h: registry.New(registry.Logger(log.New(io.Discard, "", 0))), corrupt: map[string]bool{}}
	r.srv = httptest.NewServer(r)
	t.Cleanup(r.srv.Close)
	r.host = strings.TrimPrefix(r.srv.URL, "http://")
	return r
}

// ServeHTTP implements http.Handler: the registry, behind the login and
// the corruption asked for.
func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	user, pass := r.user, r.pass
	isBlob := req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/sha256:")
	corrupt := false
	if isBlob {
		r.blobGets++
		corrupt = r.corrupt[req.URL.Path[strings.LastIndex(req.URL.Path, "/")+1:]]
	}
	cut := r.cutUploads && (req.Method == http.MethodPatch || req.Method == http.MethodPut) && strings.Contains(req.URL.Path, "/blobs/uploads/")
	r.mu.Unlock()
	if cut {
		cutUpload(w, req)
		return
	}
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

// cutUpload reads part of an upload's body and drops the connection, as a
// registry (or a proxy before it) that dies mid-upload would.
func cutUpload(w http.ResponseWriter, req *http.Request) {
	n := req.ContentLength / 2
	if n <= 0 {
		n = 1024
	}
	io.CopyN(io.Discard, req.Body, n)
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	http.Error(w, "upload cut", http.StatusBadRequest)
}

// CutUploads makes every blob upload from now on fail half way through.
func (r *Registry) CutUploads() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cutUploads = true
}

// Host is the registry's host:port.
func (r *Registry) Host() string { return r.host }

// Ref is the reference of repoTag ("team/app:1.0", "team/app@sha256:...")
// in this registry.
func (r *Registry) Ref(repoTag string) string { return r.host + "/" + repoTag }

// Close stops the registry now: what is pulled after must need no network.
func (r *Registry) Close() { r.srv.Close() }

// BlobDownloads counts the blobs served so far.
func (r *Registry) BlobDownloads() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.blobGets
}

// Corrupt makes the registry serve blob digest with a byte flipped.
func (r *Registry) Corrupt(digest v1.Hash) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.corrupt[digest.String()] = true
}

// RequireLogin makes every request need basic auth as user with pass
// (pushes of the test then log in).
func (r *Registry) RequireLogin(user, pass string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.user, r.pass = user, pass
}

func (r *Registry) pushOptions() []remote.Option {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.user == "" {
		return nil
	}
	return []remote.Option{remote.WithAuth(&authn.Basic{Username: r.user, Password: r.pass})}
}

// Push uploads img as repoTag and returns its manifest digest.
func (r *Registry) Push(repoTag string, img v1.Image) v1.Hash {
	r.t.Helper()
	r.upload("push "+repoTag, repoTag, func(ref name.Reference, o ...remote.Option) error { return remote.Write(ref, img, o...) })
	return r.digest(img.Digest())
}

// PushIndex uploads idx as repoTag and returns its digest.
func (r *Registry) PushIndex(repoTag string, idx v1.ImageIndex) v1.Hash {
	r.t.Helper()
	r.upload("push index "+repoTag, repoTag, func(ref name.Reference, o ...remote.Option) error { return remote.WriteIndex(ref, idx, o...) })
	return r.digest(idx.Digest())
}

// upload writes repoTag with write, logged in when the registry wants it;
// what names the step in a failure.
func (r *Registry) upload(what, repoTag string, write func(name.Reference, ...remote.Option) error) {
	r.t.Helper()
	ref, err := name.ParseReference(r.Ref(repoTag))
	if err != nil {
		r.t.Fatal(err)
	}
	if err := write(ref, r.pushOptions()...); err != nil {
		r.t.Fatalf("%s: %v", what, err)
	}
}

func (r *Registry) digest(d v1.Hash, err error) v1.Hash {
	r.t.Helper()
	if err != nil {
		r.t.Fatal(err)
	}
	return d
}
