package images

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/scratchrun/scratchrun/internal/images/imagestest"
)

// twoLayerImage has a base layer and an upper one that replaces a file,
// deletes one (whiteout) and empties a directory (opaque whiteout).
func twoLayerImage(t *testing.T, cfg v1.Config) v1.Image {
	base := append(slices.Clone(programLayer),
		imagestest.Entry{Name: "opt/", Type: tar.TypeDir, Mode: 0o755},
		imagestest.Entry{Name: "opt/keep", Type: tar.TypeReg, Mode: 0o644, Body: "v1"},
		imagestest.Entry{Name: "opt/gone", Type: tar.TypeReg, Mode: 0o644, Body: "deleted above"},
		imagestest.Entry{Name: "opt/dir/", Type: tar.TypeDir, Mode: 0o755},
		imagestest.Entry{Name: "opt/dir/a", Type: tar.TypeReg, Mode: 0o644, Body: "a"},
		imagestest.Entry{Name: "opt/dir/b", Type: tar.TypeReg, Mode: 0o644, Body: "b"},
		imagestest.Entry{Name: "etc/hosts", Type: tar.TypeReg, Mode: 0o644, Body: "10.9.8.7 builder\n"},
	)
	upper := []imagestest.Entry{
		{Name: "opt/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "opt/keep", Type: tar.TypeReg, Mode: 0o644, Body: "v2"},
		{Name: "opt/.wh.gone", Type: tar.TypeReg},
		{Name: "opt/dir/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "opt/dir/.wh..wh..opq", Type: tar.TypeReg},
		{Name: "opt/dir/c", Type: tar.TypeReg, Mode: 0o644, Body: "c"},
	}
	return imagestest.Image(t, "linux/amd64", cfg, base, upper)
}

func readRootfs(t *testing.T, res Resolved, p string) string {
	t.Helper()
	body, err := os.ReadFile(filepath.Join(res.RootFS, p))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(body)
}

// ociDirs lists the store's OCI image directories and unfinished ones.
func ociDirs(t *testing.T, s *Store) (done, unfinished []string) {
	t.Helper()
	entries, err := os.ReadDir(s.imagesDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch {
		case strings.HasPrefix(e.Name(), ociImageName+"-"):
			done = append(done, e.Name())
		case strings.HasPrefix(e.Name(), ".tmp-"):
			unfinished = append(unfinished, e.Name())
		}
	}
	return done, unfinished
}

func TestPullAppliesLayersAndConfigAndCachesByDigest(t *testing.T) {
	reg := imagestest.NewRegistry(t)
	cfg := v1.Config{
		Env:        []string{"PATH=/custom/bin:/usr/bin:/bin", "GREETING=from the image", "OVERRIDDEN=image", "BROKEN"},
		WorkingDir: "/opt", User: "1000:1000", Entrypoint: []string{"/bin/sh"},
	}
	digest := reg.Push("team/app:1.0", twoLayerImage(t, cfg))
	s := openTestStore(t)
	ctx := context.Background()

	var progress bytes.Buffer
	spec := specNamed("app")
	spec.Env = map[string]string{"OVERRIDDEN": "operator"}
	spec.Version, spec.Libraries = "1.0", []string{"tool"}
	if err := s.Pull(ctx, reg.Ref("team/app:1.0"), spec, ImageSelect{}, &progress); err != nil {
		t.Fatalf("Pull: %v\n%s", err, progress.String())
	}
	res, err := s.Resolve("app")
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if got := filepath.Base(res.ImageDir); got != "oci-"+digest.Hex[:12] {
		t.Errorf("image directory %s, want oci-%s (by digest)", got, digest.Hex[:12])
	}
	for p, want := range map[string]string{
		"opt/keep": "v2", "opt/dir/c": "c", "bin/sh": "#!not really a shell\n",
		"etc/hosts": "127.0.0.1 localhost sandbox\n::1 localhost ip6-localhost ip6-loopback\n", "etc/hostname": "sandbox\n",
	} {
		if got := readRootfs(t, res, p); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	for _, p := range []string{"opt/gone", "opt/dir/a", "opt/dir/b"} {
		if _, err := os.Lstat(filepath.Join(res.RootFS, p)); !os.IsNotExist(err) {
			t.Errorf("%s survived its whiteout (%v)", p, err)
		}
	}
	rt := res.Runtime
	if rt.Env["GREETING"] != "from the image" || rt.Env["PATH"] != "/custom/bin:/usr/bin:/bin" || rt.Env["OVERRIDDEN"] != "operator" || len(rt.Env) != 3 {
		t.Errorf("runtime env %v: want the image's, under the operator's", rt.Env)
	}
	if rt.Digest != digest.String() || rt.Image != reg.Ref("team/app:1.0") || rt.Version != "1.0" || !slices.Equal(rt.Libraries, []string{"tool"}) {
		t.Errorf("runtime %+v", rt)
	}
	for _, want := range []string{`User "1000:1000" is not applied`, `WorkingDir "/opt" is not applied`, "Entrypoint and Cmd are not used", "layer 2/2"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress does not say %q:\n%s", want, progress.String())
		}
	}
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list, func(im ImageInfo) bool { return im.Source == SourcePull })
	if i < 0 || !list[i].Current || list[i].Ref != reg.Ref("team/app:1.0") || list[i].Platform != "linux/amd64" || !slices.Equal(list[i].Runtimes, []string{"app"}) {
		t.Errorf("List: %+v", list)
	}
	if !slices.Contains(runtimeNames(s.Installed()), "app") {
		t.Error("app is not among the installed runtimes")
	}

	// The same digest again, under another name: no layer is downloaded.
	blobs := reg.BlobDownloads()
	progress.Reset()
	if err := s.Pull(ctx, reg.Ref("team/app:1.0"), specNamed("app2"), ImageSelect{}, &progress); err != nil {
		t.Fatalf("second Pull: %v", err)
	}
	if reg.BlobDownloads() != blobs || !strings.Contains(progress.String(), "nothing to download") {
		t.Errorf("second pull of the same digest downloaded %d blobs:\n%s", reg.BlobDownloads()-blobs, progress.String())
	}
	// By digest, with the registry gone: no network at all.
	reg.Close()
	byDigest := reg.Ref("team/app@" + digest.String())
	if err := s.Pull(ctx, byDigest, specNamed("app3"), ImageSelect{}, nil); err != nil {
		t.Fatalf("pull by digest of a stored image with the registry down: %v", err)
	}
	if done, tmp := ociDirs(t, s); len(done) != 1 || len(tmp) != 0 {
		t.Errorf("image directories %v, unfinished %v: want one image for three runtimes", done, tmp)
	}
	for _, n := range []string{"app2", "app3"} {
		if r, err := s.Resolve(n); err != nil || r.ImageDir != res.ImageDir {
			t.Errorf("Resolve(%s) = %v, %v", n, r.ImageDir, err)
		}
	}

	// The image stays while a runtime runs in it; prune removes it after.
	if err := s.Prune(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(res.ImageDir); err != nil {
		t.Fatalf("prune removed an image in use: %v", err)
	}
	for _, n := range []string{"app", "app2", "app3"} {
		if err := s.RemoveRuntime(n); err != nil {
			t.Fatalf("RemoveRuntime(%s): %v", n, err)
		}
	}
	if err := s.Prune(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(res.ImageDir); !os.IsNotExist(err) {
		t.Errorf("prune left an image no runtime runs in: %v", err)
	}
}

func TestPullPicksThePlatformFromAnIndex(t *testing.T) {
	reg := imagestest.NewRegistry(t)
	marker := func(arch string) []imagestest.Entry {
		return append(slices.Clone(programLayer), imagestest.Entry{Name: "etc/arch", Type: tar.TypeReg, Mode: 0o644, Body: arch})
	}
	idx := imagestest.Index(t,
		imagestest.Image(t, "linux/arm64/v8", v1.Config{}, marker("arm64")),
		imagestest.Image(t, "linux/amd64", v1.Config{}, marker("amd64")),
	)
	indexDigest := reg.PushIndex("multi:latest", idx)
	s := openTestStore(t)
	ctx := context.Background()
	if err := s.Pull(ctx, reg.Ref("multi:latest"), specNamed("multi"), ImageSelect{}, nil); err != nil {
		t.Fatalf("Pull: %v", err)
	}
	res, _ := s.Resolve("multi")
	if got := readRootfs(t, res, "etc/arch"); got != "amd64" {
		t.Errorf("default platform gave the %s image, want amd64", got)
	}
	if err := s.Pull(ctx, reg.Ref("multi:latest"), specNamed("multi-arm"), ImageSelect{Platform: "linux/arm64"}, nil); err != nil {
		t.Fatalf("Pull --platform linux/arm64: %v", err)
	}
	res, _ = s.Resolve("multi-arm")
	if got := readRootfs(t, res, "etc/arch"); got != "arm64" {
		t.Errorf("--platform linux/arm64 gave the %s image", got)
	}

	err := s.Pull(ctx, reg.Ref("multi:latest"), specNamed("multi-s390x"), ImageSelect{Platform: "linux/s390x"}, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "platform:") || !strings.Contains(err.Error(), "linux/amd64, linux/arm64/v8") {
		t.Errorf("wrong platform: err = %v, want one that lists the platforms offered", err)
	}
	if _, err := s.Resolve("multi-s390x"); !errors.Is(err, ErrUnknownRuntime) {
		t.Errorf("a failed pull registered its runtime: %v", err)
	}
	if done, tmp := ociDirs(t, s); len(done) != 2 || len(tmp) != 0 {
		t.Errorf("image directories %v, unfinished %v", done, tmp)
	}
	// A single-platform image of another platform is refused too.
	reg.Push("armonly:1", imagestest.Image(t, "linux/arm64", v1.Config{}, programLayer))
	err = s.Pull(ctx, reg.Ref("armonly:1"), specNamed("armonly"), ImageSelect{}, nil)
	if err == nil || !strings.Contains(err.Error(), "is a linux/arm64 image, not linux/amd64") {
		t.Errorf("single-platform image of another platform: err = %v", err)
	}
	// The index's digest names what was chosen from it: with the
	// registry gone, both platforms pulled before are found.
	reg.Close()
	for platform, arch := range map[string]string{"": "amd64", "linux/arm64": "arm64"} {
		rt := "offline-" + arch
		if err := s.Pull(ctx, reg.Ref("multi@"+indexDigest.String()), specNamed(rt), ImageSelect{Platform: platform}, nil); err != nil {
			t.Fatalf("pull by index digest (%s) with the registry down: %v", arch, err)
		}
		res, _ := s.Resolve(rt)
		if got := readRootfs(t, res, "etc/arch"); got != arch {
			t.Errorf("by index digest for %q: the %s image", platform, got)
		}
	}
}

// A corrupt layer, a missing manifest, an unreachable registry, a command
// the image lacks and an unsafe layer each fail with an error that says
// what, and leave no image, no unfinished directory and no runtime.
func TestPullFailuresLeaveNothing(t *testing.T) {
	reg := imagestest.NewRegistry(t)
	img := twoLayerImage(t, v1.Config{})
	reg.Push("corrupt:1", img)
	layers, _ := img.Layers()
	bad, _ := layers[1].Digest()
	reg.Corrupt(bad)

	outside := t.TempDir()
	hostile := imagestest.Image(t, "linux/amd64", v1.Config{},
		append(slices.Clone(programLayer), imagestest.Entry{Name: "escape", Type: tar.TypeSymlink, Link: outside}),
		[]imagestest.Entry{{Name: "escape/pwned", Type: tar.TypeReg, Mode: 0o644, Body: "x"}})
	reg.Push("hostile:1", hostile)
	bomb := imagestest.Image(t, "linux/amd64", v1.Config{},
		append(slices.Clone(programLayer),
			imagestest.Entry{Name: "a", Type: tar.TypeSymlink, Link: "b/x"}, imagestest.Entry{Name: "b", Type: tar.TypeSymlink, Link: "a/x"}),
		[]imagestest.Entry{{Name: "a/x/y", Type: tar.TypeReg, Mode: 0o644, Body: "x"}})
	reg.Push("bomb:1", bomb)
	reg.Push("nosh:1", imagestest.Image(t, "linux/amd64", v1.Config{}, []imagestest.Entry{{Name: "etc/", Type: tar.TypeDir, Mode: 0o755}}))

	s := openTestStore(t)
	for _, c := range []struct {
		ref  string
		want []string
	}{
		{reg.Ref("corrupt:1"), []string{"layer 2/2", bad.String()}},
		{reg.Ref("nosuch:1"), []string{"nosuch:1", "no such image"}},
		{"127.0.0.1:1/unreachable:1", []string{"127.0.0.1:1/unreachable:1", "connection refused"}},
		{reg.Ref("hostile:1"), []string{"layer 2/2", "unsafe tar entry"}},
		{reg.Ref("bomb:1"), []string{"layer 2/2", "unsafe tar entry"}},
		{reg.Ref("nosh:1"), []string{`command: program "/bin/sh" is not in`}},
		{"UPPER/case", []string{"reference:"}},
	} {
		err := s.Pull(context.Background(), c.ref, specNamed("failed"), ImageSelect{}, nil)
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("pull %s: err = %v, want it to mention %q", c.ref, err, w)
			}
		}
		if _, err := s.Resolve("failed"); !errors.Is(err, ErrUnknownRuntime) {
			t.Errorf("pull %s: the runtime was registered: %v", c.ref, err)
		}
		if done, tmp := ociDirs(t, s); len(tmp) != 0 || len(done) != 0 {
			t.Errorf("pull %s left images %v, unfinished %v", c.ref, done, tmp)
		}
	}
	if got := listTree(t, outside); len(got) != 0 {
		t.Errorf("a layer wrote outside the image: %v", got)
	}
}

// Credentials come from the Docker config file, as docker login writes it.
func TestPullUsesDockerConfigCredentials(t *testing.T) {
	reg := imagestest.NewRegistry(t)
	reg.RequireLogin("robot", "s3cret-pass")
	reg.Push("private:1", imagestest.Image(t, "linux/amd64", v1.Config{}, programLayer))
	s := openTestStore(t)

	cfgDir := t.TempDir()
	t.Setenv("DOCKER_CONFIG", cfgDir)
	err := s.Pull(context.Background(), reg.Ref("private:1"), specNamed("private"), ImageSelect{}, nil)
	if err == nil || !strings.Contains(err.Error(), "docker login "+reg.Host()) {
		t.Errorf("without credentials: err = %v, want a hint to log in", err)
	}
	auth := base64.StdEncoding.EncodeToString([]byte("robot:s3cret-pass"))
	writeFile(t, filepath.Join(cfgDir, "config.json"), []byte(fmt.Sprintf(`{"auths": {%q: {"auth": %q}}}`, reg.Host(), auth)))
	if err := s.Pull(context.Background(), reg.Ref("private:1"), specNamed("private"), ImageSelect{}, nil); err != nil {
		t.Fatalf("with credentials in $DOCKER_CONFIG/config.json: %v", err)
	}
}

// `images import` takes what `docker save` writes and an OCI image layout.
func TestImportDockerArchiveAndLayout(t *testing.T) {
	dir := t.TempDir()
	img := twoLayerImage(t, v1.Config{Env: []string{"FROM_ARCHIVE=yes"}})
	other := imagestest.Image(t, "linux/amd64", v1.Config{}, programLayer)
	one := filepath.Join(dir, "one.tar")
	tag, _ := name.NewTag("team/app:1.0")
	if err := tarball.WriteToFile(one, tag, img); err != nil {
		t.Fatal(err)
	}
	two := filepath.Join(dir, "two.tar")
	tag2, _ := name.NewTag("team/other:2")
	if err := tarball.MultiWriteToFile(two, map[name.Tag]v1.Image{tag: img, tag2: other}); err != nil {
		t.Fatal(err)
	}
	lay := filepath.Join(dir, "layout")
	p, err := layout.Write(lay, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{refNameAnnotation: "1.0"})); err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(other, layout.WithAnnotations(map[string]string{refNameAnnotation: "other"})); err != nil {
		t.Fatal(err)
	}
	rootfsTar := writeFile(t, filepath.Join(dir, "rootfs.tar"), imagestest.Tar(t, programLayer))

	for path, want := range map[string]ArchiveKind{one: KindDockerArchive, two: KindDockerArchive, lay: KindOCILayout, rootfsTar: KindRootFS} {
		if got, err := ImportKind(path); got != want || err != nil {
			t.Errorf("ImportKind(%s) = %v, %v; want %v", filepath.Base(path), got, err, want)
		}
	}

	s := openTestStore(t)
	ctx := context.Background()
	if err := s.ImportImage(ctx, one, specNamed("fromarchive"), ImageSelect{}, nil); err != nil {
		t.Fatalf("import docker archive: %v", err)
	}
	err = s.ImportImage(ctx, two, specNamed("ambiguous"), ImageSelect{}, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "tag:") || !strings.Contains(err.Error(), "team/other:2") {
		t.Errorf("archive of two images without --tag: err = %v", err)
	}
	if err := s.ImportImage(ctx, two, specNamed("tagged"), ImageSelect{Tag: "team/other:2"}, nil); err != nil {
		t.Fatalf("import docker archive --tag: %v", err)
	}
	if err := s.ImportImage(ctx, lay, specNamed("fromlayout"), ImageSelect{Tag: "1.0"}, nil); err != nil {
		t.Fatalf("import OCI layout: %v", err)
	}
	err = s.ImportImage(ctx, lay, specNamed("nolayouttag"), ImageSelect{Tag: "2.0"}, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "tag:") {
		t.Errorf("layout without that tag: err = %v", err)
	}
	for _, n := range []string{"fromarchive", "fromlayout"} {
		res, err := s.Resolve(n)
		if err != nil {
			t.Fatalf("Resolve(%s): %v", n, err)
		}
		if readRootfs(t, res, "opt/keep") != "v2" || readRootfs(t, res, "opt/dir/c") != "c" || res.Runtime.Env["FROM_ARCHIVE"] != "yes" {
			t.Errorf("%s: layers or env not applied: %v", n, res.Runtime.Env)
		}
		if _, err := os.Lstat(filepath.Join(res.RootFS, "opt/gone")); !os.IsNotExist(err) {
			t.Errorf("%s: whiteout not applied", n)
		}
	}
	// The layout's manifest digest is the registry's: importing from a
	// layout and pulling the same image share it.
	res, _ := s.Resolve("fromlayout")
	if d, _ := img.Digest(); res.Runtime.Digest != d.String() {
		t.Errorf("layout image stored as %s, want its manifest digest %s", res.Runtime.Digest, d)
	}
}

func TestRuntimeNamesAndSpecsAreChecked(t *testing.T) {
	reg := imagestest.NewRegistry(t)
	reg.Push("x:1", imagestest.Image(t, "linux/amd64", v1.Config{}, programLayer))
	s := openTestStore(t)
	if err := s.SetAlias("python3.12", "python3.13"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		spec RuntimeSpec
		sel  ImageSelect
		want string
	}{
		{specNamed("python3.13"), ImageSelect{}, "name: \"python3.13\" is a catalog runtime"},
		{specNamed("trixie"), ImageSelect{}, "name: \"trixie\" is a catalog image"},
		{specNamed("python3.12"), ImageSelect{}, "name: \"python3.12\" is an alias of python3.13"},
		{specNamed("Bad Name"), ImageSelect{}, "name:"},
		{RuntimeSpec{Name: "noplaceholder", Command: []string{"/bin/sh"}, File: "f"}, ImageSelect{}, "command: must contain the placeholder"},
		{RuntimeSpec{Name: "relative", Command: []string{"bin/sh", "{file}"}, File: "f"}, ImageSelect{}, "must be an absolute path or a name"},
		{RuntimeSpec{Name: "badwarm", Command: []string{"/bin/sh", "{file}"}, File: "f", Warm: "ruby"}, ImageSelect{}, "warm:"},
		{specNamed("badplatform"), ImageSelect{Platform: "linux"}, "platform:"},
	} {
		err := s.Pull(context.Background(), reg.Ref("x:1"), c.spec, c.sel, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err = %v, want %q", c.spec, err, c.want)
		}
	}
	if reg.BlobDownloads() != 0 {
		t.Errorf("bad input still downloaded %d blobs", reg.BlobDownloads())
	}
	// What the image may fill in is looked for in its config, and a
	// spec it does not complete downloads no layer.
	for _, spec := range []RuntimeSpec{{Name: "nocmd", File: "f"}, {Name: "nofile", Command: []string{"/bin/sh", "{file}"}}} {
		blobs := reg.BlobDownloads()
		err := s.Pull(context.Background(), reg.Ref("x:1"), spec, ImageSelect{}, nil)
		if err == nil || !strings.Contains(err.Error(), "carries no runtime spec") || !strings.Contains(err.Error(), "give --command and --file") {
			t.Errorf("%+v: err = %v", spec, err)
		}
		if got := reg.BlobDownloads() - blobs; got != 1 {
			t.Errorf("%+v: %d blobs downloaded, want the config alone", spec, got)
		}
	}
}
