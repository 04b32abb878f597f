package images

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/images/imagestest"
)

func openTestStore(t *testing.T) *Store {
	t.Helper()
	s, err := OpenStore(Options{Root: filepath.Join(t.TempDir(), "state"), UIDBase: testBase})
	if err != nil {
		t.Fatalf("OpenStore: %v", err)
	}
	return s
}

// fakeBuilt puts an image directory in place as a build would, without
// running mmdebstrap, and returns its directory.
func fakeBuilt(t *testing.T, s *Store, name, hash string, created time.Time) string {
	t.Helper()
	dir := filepath.Join(s.imagesDir, name+"-"+shortHash(hash))
	if err := os.MkdirAll(filepath.Join(dir, "rootfs", "usr", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	m := imageMeta{Name: name, RecipeHash: hash, Source: SourceMmdebstrap, Created: created, UIDBase: s.uidBase(), SetIDFree: true}
	if err := writeJSONAtomic(filepath.Join(dir, "image.json"), m); err != nil {
		t.Fatal(err)
	}
	return dir
}

func currentHash(t *testing.T, s *Store, image string) string {
	img, ok := s.cat.image(image)
	if !ok {
		t.Fatalf("no image %s", image)
	}
	return recipeHash(img)
}

func runtimeNames(rs []Runtime) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

func TestOpenStoreDefaultsAndLayout(t *testing.T) {
	s := openTestStore(t)
	for _, d := range []string{s.imagesDir, s.runtimesDir} {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v, mode %v", d, err, fi.Mode())
		}
	}
	if got := runtimeNames(s.Catalog()); !slices.Equal(got, []string{"bash", "node20", "python3.11", "python3.13"}) {
		t.Errorf("Catalog() = %v", got)
	}
	if got := s.Installed(); len(got) != 0 {
		t.Errorf("Installed() = %v on an empty store", runtimeNames(got))
	}
	if _, err := OpenStore(Options{Root: t.TempDir(), UIDBase: 4294967295 - 100}); err == nil || !strings.Contains(err.Error(), "UIDBase") {
		t.Errorf("huge UIDBase: err = %v, want an error naming UIDBase", err)
	}
}

func TestResolveErrors(t *testing.T) {
	s := openTestStore(t)
	_, err := s.Resolve("python3.13")
	if !errors.Is(err, ErrRuntimeNotInstalled) || errors.Is(err, ErrUnknownRuntime) {
		t.Fatalf("Resolve(python3.13) on empty store: %v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `its image "trixie"`) || !strings.Contains(msg, "installed runtimes: none") ||
		!strings.Contains(msg, "scratchrun images build python3.13") {
		t.Errorf("message: %s", msg)
	}

	trixieDir := fakeBuilt(t, s, "trixie", currentHash(t, s, "trixie"), time.Now())
	// python3.11 is in the catalog, its image (bookworm) is not built.
	_, err = s.Resolve("python3.11")
	want := `runtime "python3.11" is not installed: its image "bookworm" (recipe ` + shortHash(currentHash(t, s, "bookworm")) +
		") has not been built; installed runtimes: bash, node20, python3.13 (run `scratchrun images build python3.11`)"
	if err == nil || err.Error() != want {
		t.Errorf("Resolve(python3.11):\n got %v\nwant %s", err, want)
	}
	var nie *NotInstalledError
	if !errors.As(err, &nie) || !nie.Known {
		t.Errorf("want a *NotInstalledError with Known, got %#v", err)
	}

	_, err = s.Resolve("python3.12")
	if !errors.Is(err, ErrUnknownRuntime) || !errors.Is(err, ErrRuntimeNotInstalled) {
		t.Errorf("Resolve(python3.12) = %v, want unknown and not installed", err)
	}
	want = `runtime "python3.12" is not installed: no such runtime in the catalog or among imported runtimes; ` +
		"installed runtimes: bash, node20, python3.13 (run `scratchrun images build` to also install python3.11)"
	if err.Error() != want {
		t.Errorf("Resolve(python3.12):\n got %v\nwant %s", err, want)
	}

	if _, err := s.Resolve("Python 3"); !errors.Is(err, ErrInvalidName) || !strings.HasPrefix(err.Error(), "runtime:") {
		t.Errorf("Resolve(bad name) = %v", err)
	}

	res, err := s.Resolve("python3.13")
	if err != nil {
		t.Fatalf("Resolve(python3.13): %v", err)
	}
	if res.RootFS != filepath.Join(trixieDir, "rootfs") || res.ImageDir != trixieDir || res.UIDBase != s.uidBase() {
		t.Errorf("Resolved = %+v", res)
	}
	if res.Runtime.File != "main.py" || res.Runtime.Env["MPLBACKEND"] != "Agg" {
		t.Errorf("Resolved runtime = %+v", res.Runtime)
	}
	// The caller's copy is its own.
	res.Runtime.Env["MPLBACKEND"] = "TkAgg"
	res.Runtime.Command[0] = "/bin/false"
	again, _ := s.Resolve("python3.13")
	if again.Runtime.Env["MPLBACKEND"] != "Agg" || again.Runtime.Command[0] != "/usr/bin/python3.13" {
		t.Error("Resolve handed out the store's own map/slice")
	}
}

func TestResolveSeesOtherProcessesChanges(t *testing.T) {
	s := openTestStore(t)
	// Built "by another process" after s was opened.
	dir := fakeBuilt(t, s, "trixie", currentHash(t, s, "trixie"), time.Now())
	if _, err := s.Resolve("bash"); err != nil {
		t.Fatalf("Resolve after external build: %v", err)
	}
	// Removed by another process: Resolve must not hand out a dead path.
	if err := removeImageDir(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resolve("bash"); !errors.Is(err, ErrRuntimeNotInstalled) {
		t.Errorf("Resolve after external removal: %v", err)
	}
}

// importTarball is a tiny rootfs: a fake interpreter (never run).
func importTarball(t *testing.T, marker string) []byte {
	return imagestest.Tar(t, []imagestest.Entry{
		{Name: "bin/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "bin/tool", Type: tar.TypeReg, Mode: 0o755, Body: "#!/bin/sh\n# " + marker + "\n"},
		{Name: "usr/bin/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "usr/bin/tool", Type: tar.TypeSymlink, Link: "/bin/tool"},
		{Name: "dev/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "dev/null", Type: tar.TypeChar, Mode: 0o666},
	})
}

func TestImportThenResolveListAndPrune(t *testing.T) {
	s := openTestStore(t)
	tarPath := writeFile(t, filepath.Join(t.TempDir(), "rootfs.tar.gz"), gzipBytes(t, importTarball(t, "v1")))
	var progress bytes.Buffer
	env := map[string]string{"TOOL_MODE": "strict"}
	if err := s.Import("mytool", tarPath, []string{"/usr/bin/tool", "--run", "{file}"}, "main.tool", env, &progress); err != nil {
		t.Fatalf("Import: %v\n%s", err, progress.String())
	}
	res, err := s.Resolve("mytool")
	if err != nil {
		t.Fatalf("Resolve(mytool): %v", err)
	}
	// The image is named by the sha256 of the tarball file as given.
	raw, _ := os.ReadFile(tarPath)
	sum := sha256.Sum256(raw)
	if want := "mytool-" + hex.EncodeToString(sum[:])[:12]; filepath.Base(res.ImageDir) != want {
		t.Errorf("image dir %s, want %s", filepath.Base(res.ImageDir), want)
	}
	if res.Runtime.Image != "mytool" || res.Runtime.File != "main.tool" || res.Runtime.Env["TOOL_MODE"] != "strict" ||
		!slices.Equal(res.Runtime.Command, []string{"/usr/bin/tool", "--run", "{file}"}) {
		t.Errorf("runtime = %+v", res.Runtime)
	}
	if body, err := os.ReadFile(filepath.Join(res.RootFS, "bin/tool")); err != nil || !strings.Contains(string(body), "v1") {
		t.Errorf("rootfs bin/tool: %q, %v", body, err)
	}
	for _, d := range []string{"code", "tmp", "proc", "sys"} {
		if fi, err := os.Stat(filepath.Join(res.RootFS, d)); err != nil || !fi.IsDir() {
			t.Errorf("mount point /%s missing: %v", d, err)
		}
	}
	// A mount point only (sandboxes mount a tmpfs there), and writable by
	// no host user but its owner, the sandbox's root.
	wantCode := os.FileMode(0o777)
	if isRoot() {
		wantCode = 0o775
	}
	if fi, _ := os.Stat(filepath.Join(res.RootFS, "code")); fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != wantCode {
		t.Errorf("/code mode %v, want sticky %v", fi.Mode(), wantCode)
	}
	if _, err := os.Stat(filepath.Join(s.runtimesDir, "mytool.json")); err != nil {
		t.Errorf("runtime file: %v", err)
	}
	if !slices.Contains(runtimeNames(s.Installed()), "mytool") || !slices.Contains(runtimeNames(s.Catalog()), "mytool") {
		t.Error("imported runtime missing from Installed/Catalog")
	}

	// A second store on the same root loads runtimes.d.
	s2, err := OpenStore(Options{Root: s.root, UIDBase: testBase})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Resolve("mytool"); err != nil {
		t.Errorf("fresh store: Resolve(mytool): %v", err)
	}

	// Re-import with new content: the new image is current, the old is
	// kept until Prune.
	tar2 := writeFile(t, filepath.Join(t.TempDir(), "rootfs2.tar"), importTarball(t, "v2"))
	time.Sleep(10 * time.Millisecond) // distinct Created times
	if err := s.Import("mytool", tar2, []string{"/bin/tool", "{file}"}, "main.tool", nil, nil); err != nil {
		t.Fatalf("re-import: %v", err)
	}
	res2, _ := s.Resolve("mytool")
	if res2.ImageDir == res.ImageDir {
		t.Fatal("re-import with other content reused the image directory")
	}
	if body, _ := os.ReadFile(filepath.Join(res2.RootFS, "bin/tool")); !strings.Contains(string(body), "v2") {
		t.Errorf("after re-import bin/tool = %q", body)
	}

	// An outdated catalog build and a stale temp dir, for Prune.
	old := fakeBuilt(t, s, "trixie", strings.Repeat("0", 64), time.Now())
	cur := fakeBuilt(t, s, "trixie", currentHash(t, s, "trixie"), time.Now())
	stale := filepath.Join(s.imagesDir, ".tmp-trixie-123")
	os.MkdirAll(filepath.Join(stale, "rootfs"), 0o755)

	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	current := map[string]bool{}
	for _, info := range list {
		current[info.Path] = info.Current
		if info.Path == res2.ImageDir && (info.Source != SourceImport || !slices.Equal(info.Runtimes, []string{"mytool"})) {
			t.Errorf("import info = %+v", info)
		}
		if info.Path == cur && !slices.Equal(info.Runtimes, []string{"bash", "node20", "python3.13"}) {
			t.Errorf("trixie runtimes = %v", info.Runtimes)
		}
	}
	wantCurrent := map[string]bool{res.ImageDir: false, res2.ImageDir: true, old: false, cur: true}
	for p, want := range wantCurrent {
		if got, ok := current[p]; !ok || got != want {
			t.Errorf("List: %s current=%v (listed %v), want %v", p, got, ok, want)
		}
	}

	if err := s.Prune(); err != nil {
		t.Fatalf("Prune: %v", err)
	}
	for p, keep := range wantCurrent {
		if _, err := os.Stat(p); (err == nil) != keep {
			t.Errorf("after Prune %s exists=%v, want %v", p, err == nil, keep)
		}
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temp dir survived Prune: %v", err)
	}
	if _, err := s.Resolve("mytool"); err != nil {
		t.Errorf("Resolve after Prune: %v", err)
	}
}

func TestImportValidation(t *testing.T) {
	s := openTestStore(t)
	good := writeFile(t, filepath.Join(t.TempDir(), "r.tar"), importTarball(t, "x"))
	cmd := []string{"/bin/tool", "{file}"}
	cases := []struct {
		name, tar string
		cmd       []string
		file      string
		env       map[string]string
		want      string
	}{
		{"python3.13", good, cmd, "m", nil, "catalog runtime"},
		{"trixie", good, cmd, "m", nil, "catalog image"},
		{"Bad", good, cmd, "m", nil, "name:"},
		{"ok", good, []string{"/bin/tool", "main"}, "m", nil, "command: must contain the placeholder {file}"},
		{"ok", good, nil, "m", nil, "command:"},
		{"ok", good, cmd, "", nil, "file:"},
		{"ok", good, cmd, "a/b", nil, "file:"},
		{"ok", good, cmd, "m", map[string]string{"A=B": "x"}, "env:"},
		{"ok", "", cmd, "m", nil, "tarball:"},
		{"ok", "/nonexistent/r.tar", cmd, "m", nil, "tarball:"},
		{"ok", good, []string{"/usr/bin/python3", "{file}"}, "m", nil, `command: program "/usr/bin/python3" is not in the tarball`},
		{"ok", good, []string{"/bin", "{file}"}, "m", nil, "not an executable file"},
	}
	for _, tc := range cases {
		err := s.Import(tc.name, tc.tar, tc.cmd, tc.file, tc.env, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Import(%q, %q, %q, %q): err = %v, want %q", tc.name, tc.tar, tc.cmd, tc.file, err, tc.want)
		}
	}
	if got := s.Installed(); len(got) != 0 {
		t.Errorf("failed imports installed %v", runtimeNames(got))
	}
	if entries, _ := os.ReadDir(s.imagesDir); len(entries) != 1 { // only .lock
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("images dir after failed imports: %v", names)
	}
}

func TestImportHostileTarballLeavesNothing(t *testing.T) {
	s := openTestStore(t)
	outside := t.TempDir()
	data := imagestest.Tar(t, []imagestest.Entry{
		{Name: "bin/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "bin/tool", Type: tar.TypeReg, Mode: 0o755, Body: "x"},
		{Name: "etc", Type: tar.TypeSymlink, Link: outside},
		{Name: "etc/passwd", Type: tar.TypeReg, Mode: 0o644, Body: "root::0:0::/:/bin/sh\n"},
	})
	tarPath := writeFile(t, filepath.Join(t.TempDir(), "evil.tar.gz"), gzipBytes(t, data))
	err := s.Import("evil", tarPath, []string{"/bin/tool", "{file}"}, "m", nil, nil)
	if !errors.Is(err, ErrUnsafeEntry) {
		t.Errorf("Import(evil) = %v, want ErrUnsafeEntry", err)
	}
	if got := listTree(t, outside); len(got) != 0 {
		t.Errorf("outside dir written: %v", got)
	}
	if _, err := s.Resolve("evil"); !errors.Is(err, ErrUnknownRuntime) {
		t.Errorf("Resolve(evil) = %v, want unknown", err)
	}
	if entries, _ := os.ReadDir(s.imagesDir); len(entries) != 1 {
		t.Errorf("images dir not clean after failed import: %d entries", len(entries))
	}
}

func TestBuildSelectionAndUpToDate(t *testing.T) {
	s := openTestStore(t)
	err := s.Build(context.Background(), []string{"python3.12"}, false, nil)
	if err == nil || !strings.Contains(err.Error(), `"python3.12" is neither a catalog image`) {
		t.Errorf("Build(unknown) = %v", err)
	}
	imgs, err := s.selectImages([]string{"bash", "python3.13", "bookworm", "node20"})
	if err != nil || len(imgs) != 2 || imgs[0].Name != "trixie" || imgs[1].Name != "bookworm" {
		t.Errorf("selectImages = %v, %v", imgs, err)
	}
	// Both images present for their recipes: nothing to build, so this
	// never reaches mmdebstrap.
	fakeBuilt(t, s, "trixie", currentHash(t, s, "trixie"), time.Now())
	fakeBuilt(t, s, "bookworm", currentHash(t, s, "bookworm"), time.Now())
	os.MkdirAll(filepath.Join(s.imagesDir, ".tmp-trixie-killed", "rootfs"), 0o755)
	var out bytes.Buffer
	if err := s.Build(context.Background(), nil, false, &out); err != nil {
		t.Fatalf("Build: %v", err)
	}
	for _, want := range []string{
		"[1/2] image trixie " + shortHash(currentHash(t, s, "trixie")) + " is up to date",
		"[2/2] image bookworm " + shortHash(currentHash(t, s, "bookworm")) + " is up to date",
		"removing unfinished",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, out.String())
		}
	}
	if _, err := os.Stat(filepath.Join(s.imagesDir, ".tmp-trixie-killed")); !os.IsNotExist(err) {
		t.Error("stale .tmp dir not removed by Build")
	}
}
