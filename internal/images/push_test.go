package images

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/scratchrun/scratchrun/internal/images/imagestest"
)

// fleetLayer is a tree with what a pushed tree must carry through: a
// hard link, symlinks (one absolute, resolved in the image), a file of
// another owner, a directory of its own mode, a long name (PAX) and an
// mtime of its own.
var fleetLayer = []imagestest.Entry{
	{Name: "usr/", Type: tar.TypeDir, Mode: 0o755},
	{Name: "usr/bin/", Type: tar.TypeDir, Mode: 0o755},
	{Name: "usr/bin/sh", Type: tar.TypeReg, Mode: 0o755, Body: "#!not really a shell\n"},
	{Name: "usr/bin/sh-again", Type: tar.TypeLink, Link: "usr/bin/sh"},
	{Name: "usr/bin/python3", Type: tar.TypeSymlink, Link: "/usr/bin/sh"},
	{Name: "bin", Type: tar.TypeSymlink, Link: "usr/bin"},
	{Name: "etc/", Type: tar.TypeDir, Mode: 0o755},
	{Name: "home/", Type: tar.TypeDir, Mode: 0o755},
	{Name: "home/app/", Type: tar.TypeDir, Mode: 0o750, UID: 1000, GID: 1000},
	{Name: "home/app/" + strings.Repeat("long-name-", 12), Type: tar.TypeReg, Mode: 0o600, UID: 1000, GID: 1000, Body: "the app's\n"},
}

// pulledRuntime is the runtime a store holds under name, as Pull wrote it.
func pulledRuntime(t *testing.T, s *Store, name string) Runtime {
	t.Helper()
	res, err := s.Resolve(name)
	if err != nil {
		t.Fatalf("Resolve(%s): %v", name, err)
	}
	return res.Runtime
}

// A runtime pushed from one store and pulled into another by its name and
// reference alone is the same runtime on the same digest; pushed again
// from there, the same tree gives the same digest; exported to a layout
// and an archive, each imports with no flags.
func TestPushPullRoundTrip(t *testing.T) {
	reg := imagestest.NewRegistry(t)
	reg.Push("upstream/app:1", imagestest.Image(t, "linux/amd64", v1.Config{Env: []string{"PATH=/usr/bin:/bin", "FROM=image"}, User: "app"}, fleetLayer))
	ctx := context.Background()
	a, b := openTestStore(t), openTestStore(t)
	spec := RuntimeSpec{Name: "app", Command: []string{"python3", "-u", "{file}"}, File: "main.py", Env: map[string]string{"FROM_OPERATOR": "yes"},
		Version: "3.13", Libraries: []string{"stdlib"}, Warm: "python", Preload: []string{"json"}}
	if err := a.Pull(ctx, reg.Ref("upstream/app:1"), spec, ImageSelect{}, nil); err != nil {
		t.Fatalf("pull into the first store: %v", err)
	}
	first := pulledRuntime(t, a, "app")
	if first.Command[0] != "/usr/bin/python3" {
		t.Errorf("bare python3 resolved to %q, want /usr/bin/python3 (the image's PATH)", first.Command[0])
	}

	var progress bytes.Buffer
	ref, err := a.Push(ctx, "app", reg.Ref("fleet/app:1"), false, &progress)
	if err != nil {
		t.Fatalf("Push: %v\n%s", err, progress.String())
	}
	if !strings.HasPrefix(ref, reg.Ref("fleet/app@sha256:")) {
		t.Errorf("Push returned %q, want the reference by digest", ref)
	}
	digest := strings.TrimPrefix(ref, reg.Ref("fleet/app@"))

	if err := b.Pull(ctx, reg.Ref("fleet/app:1"), RuntimeSpec{Name: "app"}, ImageSelect{}, nil); err != nil {
		t.Fatalf("pull with no flags: %v", err)
	}
	second := pulledRuntime(t, b, "app")
	if second.Digest != digest {
		t.Errorf("pulled digest %s, pushed %s", second.Digest, digest)
	}
	same := func(r Runtime) Runtime { r.Name, r.Image, r.Digest = "", "", ""; return r }
	if !reflect.DeepEqual(same(first), same(second)) {
		t.Errorf("pulled runtime differs:\n pushed %+v\n pulled %+v", first, second)
	}
	res, _ := b.Resolve("app")
	long := filepath.Join(res.RootFS, "home/app", strings.Repeat("long-name-", 12))
	if body, err := os.ReadFile(long); err != nil || string(body) != "the app's\n" {
		t.Errorf("long-named file: %q, %v", body, err)
	}
	var st1, st2 os.FileInfo
	if st1, err = os.Stat(filepath.Join(res.RootFS, "usr/bin/sh")); err == nil {
		st2, err = os.Stat(filepath.Join(res.RootFS, "usr/bin/sh-again"))
	}
	if err != nil || !os.SameFile(st1, st2) {
		t.Errorf("the hard link did not come through: %v", err)
	}

	again, err := b.Push(ctx, "app", reg.Ref("fleet/app:again"), false, nil)
	if err != nil {
		t.Fatalf("push from the second store: %v", err)
	}
	if got := strings.TrimPrefix(again, reg.Ref("fleet/app@")); got != digest {
		t.Errorf("the pulled tree pushed to %s, the first push was %s", got, digest)
	}

	// Flags still override the image's spec.
	if err := b.Pull(ctx, ref, RuntimeSpec{Name: "app-cold", Warm: "none", Version: "mine"}, ImageSelect{}, nil); err != nil {
		t.Fatalf("pull with flags: %v", err)
	}
	if cold := pulledRuntime(t, b, "app-cold"); cold.Warm != "" || cold.Version != "mine" || cold.File != "main.py" {
		t.Errorf("flags did not override: %+v", cold)
	}

	dir := t.TempDir()
	lay, archive := filepath.Join(dir, "layout"), filepath.Join(dir, "app.tar")
	if d, err := b.Export("app", lay, nil); err != nil || d.String() != digest {
		t.Fatalf("export layout: %v, %v (want %s)", d, err, digest)
	}
	if _, err := b.Export("app", archive, nil); err != nil {
		t.Fatalf("export archive: %v", err)
	}
	if _, err := b.Export("app", lay, nil); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("export over a layout: err = %v", err)
	}
	c := openTestStore(t)
	for n, path := range map[string]string{"from-layout": lay, "from-archive": archive} {
		if err := c.ImportImage(ctx, path, RuntimeSpec{Name: n}, ImageSelect{}, nil); err != nil {
			t.Fatalf("import %s: %v", n, err)
		}
		if got := pulledRuntime(t, c, n); !reflect.DeepEqual(same(got), same(second)) || (n == "from-layout" && got.Digest != digest) {
			t.Errorf("%s: %+v, want %+v on %s", n, got, second, digest)
		}
	}
}

// An image without a spec still needs --command; a spec's bare name not in
// the image's PATH is refused naming the PATH; a corrupt or cut push
// leaves the pulling store empty.
func TestPushedImageFailures(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where pushes write their layer
	reg := imagestest.NewRegistry(t)
	reg.Push("plain:1", imagestest.Image(t, "linux/amd64", v1.Config{Env: []string{"PATH=/opt/bin"}}, fleetLayer))
	ctx := context.Background()
	s := openTestStore(t)
	check := func(what string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want it to say %q", what, err, want)
		}
		if _, err := s.Resolve("failed"); !errors.Is(err, ErrUnknownRuntime) {
			t.Errorf("%s: the runtime was registered: %v", what, err)
		}
		if done, tmp := ociDirs(t, s); len(done) != 0 || len(tmp) != 0 {
			t.Errorf("%s: left images %v, unfinished %v", what, done, tmp)
		}
	}
	blobs := reg.BlobDownloads()
	check("no spec, no flags", s.Pull(ctx, reg.Ref("plain:1"), RuntimeSpec{Name: "failed"}, ImageSelect{}, nil), "give --command and --file")
	if got := reg.BlobDownloads() - blobs; got != 1 {
		t.Errorf("a pull refused for want of a spec downloaded %d blobs, want the config alone", got)
	}
	check("name not in PATH", s.Pull(ctx, reg.Ref("plain:1"), RuntimeSpec{Name: "failed", Command: []string{"sh", "{file}"}, File: "m"}, ImageSelect{}, nil),
		`program "sh" is not in the image's PATH (/opt/bin)`)

	src := openTestStore(t)
	if err := src.Pull(ctx, reg.Ref("plain:1"), RuntimeSpec{Name: "app", Command: []string{"/bin/sh", "{file}"}, File: "m"}, ImageSelect{}, nil); err != nil {
		t.Fatal(err)
	}
	ref, err := src.Push(ctx, "app", reg.Ref("fleet/corrupt:1"), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	img := remoteImage(t, ref)
	layers, _ := img.Layers()
	layer, _ := layers[0].Digest()
	reg.Corrupt(layer)
	check("corrupt layer", s.Pull(ctx, reg.Ref("fleet/corrupt:1"), RuntimeSpec{Name: "failed"}, ImageSelect{}, nil), "layer 1/1 "+layer.String())

	// A tree the registry has no blob of yet, so that the cut falls in
	// a layer's upload.
	reg.Push("other:1", imagestest.Image(t, "linux/amd64", v1.Config{}, append(slices.Clone(fleetLayer),
		imagestest.Entry{Name: "etc/other", Type: tar.TypeReg, Mode: 0o644, Body: "other"})))
	if err := src.Pull(ctx, reg.Ref("other:1"), RuntimeSpec{Name: "other", Command: []string{"/bin/sh", "{file}"}, File: "m"}, ImageSelect{}, nil); err != nil {
		t.Fatal(err)
	}
	reg.CutUploads()
	if _, err := src.Push(ctx, "other", reg.Ref("fleet/cut:1"), false, nil); err == nil {
		t.Fatal("a push the registry cut short succeeded")
	}
	check("cut push", s.Pull(ctx, reg.Ref("fleet/cut:1"), RuntimeSpec{Name: "failed"}, ImageSelect{}, nil), "no such image")
	if done, _ := ociDirs(t, src); len(done) != 2 {
		t.Errorf("the pushing store has images %v", done)
	}
	if _, err := src.Push(ctx, "nosuch", reg.Ref("x:1"), false, nil); !errors.Is(err, ErrRuntimeNotInstalled) {
		t.Errorf("push of an unknown runtime: %v", err)
	}
	if left := listTree(t, tmp); len(left) != 0 {
		t.Errorf("pushes left files in $TMPDIR: %v", left)
	}
}

// remoteImage is the image ref names in its registry.
func remoteImage(t *testing.T, ref string) v1.Image {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r)
	if err != nil {
		t.Fatal(err)
	}
	return img
}
