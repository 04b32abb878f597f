package images

import (
	"archive/tar"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/scratchrun/scratchrun/internal/images/imagestest"
)

// nobody is the host user the set-id tests act as.
const nobody = 65534

// setIDLayer is a rootfs with real programs made set-user-ID and
// set-group-ID root, as Debian's mount, passwd and chfn are: id says whose
// ids it runs with, tee writes a file with them.
func setIDLayer(t *testing.T) []imagestest.Entry {
	t.Helper()
	read := func(p string) string {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Skipf("need %s: %v", p, err)
		}
		return string(data)
	}
	return append(slices.Clone(programLayer),
		imagestest.Entry{Name: "usr/", Type: tar.TypeDir, Mode: 0o755},
		imagestest.Entry{Name: "usr/bin/", Type: tar.TypeDir, Mode: 0o755},
		imagestest.Entry{Name: "usr/bin/id", Type: tar.TypeReg, Mode: 0o6755, Body: read("/usr/bin/id")},
		imagestest.Entry{Name: "usr/bin/tee", Type: tar.TypeReg, Mode: 0o4755, Body: read("/usr/bin/tee")},
		imagestest.Entry{Name: "usr/bin/wall", Type: tar.TypeReg, Mode: 0o2755, GID: 5, Body: "#!/bin/sh\n"},
		imagestest.Entry{Name: "var/", Type: tar.TypeDir, Mode: 0o755},
		imagestest.Entry{Name: "var/mail/", Type: tar.TypeDir, Mode: 0o2775, GID: 8},
	)
}

// reachableStore opens a store under a path every host user may traverse,
// as /var/lib/scratchrun is (TempDir's own directories are 0700).
func reachableStore(t *testing.T) *Store {
	t.Helper()
	dir := t.TempDir()
	for p := dir; p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s, err := OpenStore(Options{Root: filepath.Join(dir, "state"), UIDBase: testBase})
	if err != nil {
		t.Fatalf("OpenStore: %v", err)
	}
	return s
}

// asUser runs argv with the host credentials uid:gid and no supplementary
// groups, and returns its output and error.
func asUser(uid, gid uint32, argv ...string) (string, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// A host user runs the store's set-id programs and writes its files through
// them: before the fix, nobody ran id with euid testBase and with tee wrote
// into an image every later sandbox starts from. The store is reachable to
// every host user on purpose (an ordinary user's rootless engine runs
// root's images): what it holds must hand out no id.
func TestStoreSetIDFilesGiveHostUsersNothing(t *testing.T) {
	if !isRoot() {
		t.Skip("needs root: the store shifts owners and the test acts as nobody")
	}
	reg := imagestest.NewRegistry(t)
	reg.Push("setid:1", imagestest.Image(t, "linux/amd64", v1.Config{}, setIDLayer(t)))
	s := reachableStore(t)
	if err := s.Pull(context.Background(), reg.Ref("setid:1"), specNamed("setid"), ImageSelect{}, nil); err != nil {
		t.Fatalf("Pull: %v", err)
	}
	res, err := s.Resolve("setid")
	if err != nil {
		t.Fatal(err)
	}
	id := filepath.Join(res.RootFS, "usr/bin/id")
	// Every host user may run the image's programs (an ordinary user's
	// rootless engine runs root's images), but as itself.
	for _, flag := range []string{"-u", "-g"} {
		if out, err := asUser(nobody, nobody, id, flag); err != nil || strings.TrimSpace(out) != "65534" {
			t.Errorf("nobody ran the image's set-id id %s: %q, %v; want nobody's own id", flag, out, err)
		}
	}
	target := filepath.Join(res.RootFS, "etc/hostname")
	before, _ := os.ReadFile(target)
	if out, err := asUser(nobody, nobody, filepath.Join(res.RootFS, "usr/bin/tee"), "-a", target); err == nil {
		t.Errorf("nobody wrote into the image through its set-id tee: %s", out)
	}
	if out, err := asUser(nobody, nobody, "/bin/sh", "-c", "echo backdoor >> "+target); err == nil {
		t.Errorf("nobody opened an image file for writing: %s", out)
	}
	if after, _ := os.ReadFile(target); string(after) != string(before) {
		t.Errorf("%s changed from %q to %q", target, before, after)
	}
	if out, err := asUser(nobody, nobody, "/bin/cat", filepath.Join(res.RootFS, "etc/hostname")); err != nil || out != "sandbox\n" {
		t.Errorf("nobody cannot read the image: %v: %q", err, out)
	}
}

// Every way into the store (pull, rootfs import, build) writes no set-id
// file, and nothing in it is writable by host users other than its owners.
func TestStoreHoldsNoSetIDFiles(t *testing.T) {
	s := openTestStore(t)
	ctx := context.Background()
	entries := setIDLayer(t)
	reg := imagestest.NewRegistry(t)
	reg.Push("setid:1", imagestest.Image(t, "linux/amd64", v1.Config{}, entries))
	if err := s.Pull(ctx, reg.Ref("setid:1"), specNamed("pulled"), ImageSelect{}, nil); err != nil {
		t.Fatalf("Pull: %v", err)
	}
	rootfsTar := writeFile(t, filepath.Join(t.TempDir(), "rootfs.tar"), imagestest.Tar(t, entries))
	if err := s.Import("imported", rootfsTar, []string{"/bin/sh", "{file}"}, "main.sh", nil, nil); err != nil {
		t.Fatalf("Import: %v", err)
	}
	fakeMmdebstrap(t, `cp `+rootfsTar+` "$out"`)
	if err := s.Build(ctx, []string{"bash"}, false, nil); err != nil {
		t.Fatalf("Build: %v", err)
	}
	images := 0
	for _, rt := range []string{"pulled", "imported", "bash"} {
		res, err := s.Resolve(rt)
		if err != nil {
			t.Fatalf("Resolve(%s): %v", rt, err)
		}
		images++
		for _, bad := range scanStore(t, res.RootFS) {
			t.Errorf("%s: %s", rt, bad)
		}
		if fi, err := os.Stat(filepath.Join(res.RootFS, "var/mail")); err != nil || fi.Mode()&fs.ModeSetgid == 0 {
			t.Errorf("%s: a set-group-ID directory lost its bit (%v): it grants nothing", rt, err)
		}
	}
	if images != 3 {
		t.Errorf("scanned %d images, want 3", images)
	}
}

// scanStore lists what in a rootfs could hand out an id or be changed by a
// host user who is not its owner.
func scanStore(t *testing.T, rootfs string) []string {
	t.Helper()
	var bad []string
	err := filepath.WalkDir(rootfs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		m := fi.Mode()
		switch {
		case m&fs.ModeSymlink != 0:
		case !m.IsDir() && m&(fs.ModeSetuid|fs.ModeSetgid) != 0:
			bad = append(bad, p+" is set-id: "+m.String())
		case isRoot() && m.Perm()&0o002 != 0:
			bad = append(bad, p+" is writable by every host user: "+m.String())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return bad
}

// An image written before set-id bits were stripped is fixed when the
// store is opened, and one that cannot be is not used.
func TestOpenStoreStripsSetIDOfOlderImages(t *testing.T) {
	s := openTestStore(t)
	dir := fakeBuilt(t, s, "trixie", currentHash(t, s, "trixie"), imagestest.ModTime)
	var m imageMeta
	if err := readJSON(filepath.Join(dir, "image.json"), &m); err != nil {
		t.Fatal(err)
	}
	m.SetIDFree = false // as every image.json before the fix
	if err := writeJSONAtomic(filepath.Join(dir, "image.json"), m); err != nil {
		t.Fatal(err)
	}
	mount := filepath.Join(dir, "rootfs/usr/bin/mount")
	if err := os.WriteFile(mount, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(mount, 0o755|fs.ModeSetuid|fs.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("mount", filepath.Join(dir, "rootfs/usr/bin/umount")); err != nil {
		t.Fatal(err)
	}

	s2, err := OpenStore(Options{Root: s.Root(), UIDBase: testBase})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	fi, err := os.Stat(mount)
	if err != nil || fi.Mode() != 0o755 {
		t.Errorf("%s after reopening: mode %v (%v), want 0755", mount, fi.Mode(), err)
	}
	if err := readJSON(filepath.Join(dir, "image.json"), &m); err != nil || !m.SetIDFree {
		t.Errorf("image.json does not record the strip: %+v, %v", m, err)
	}
	if _, err := s2.Resolve("python3.13"); err != nil {
		t.Errorf("the fixed image is not used: %v", err)
	}
}

// asUserEnv is the variable that makes TestOpenStoreAsAnotherUserHelper
// open the store at its value (and the only way that test does anything).
const asUserEnv = "SCRATCHRUN_TEST_OPEN_STORE_AS_USER"

// An ordinary user opens root's store (its rootless engine runs root's
// images): an image root has not stripped yet is not used, and the store
// opens all the same, changing nothing.
func TestOpenStoreAsAnotherUserLeavesUnstrippedImagesAlone(t *testing.T) {
	if !isRoot() {
		t.Skip("needs root to act as another user")
	}
	s := reachableStore(t)
	dir := fakeBuilt(t, s, "trixie", currentHash(t, s, "trixie"), imagestest.ModTime)
	var m imageMeta
	if err := readJSON(filepath.Join(dir, "image.json"), &m); err != nil {
		t.Fatal(err)
	}
	m.SetIDFree = false
	if err := writeJSONAtomic(filepath.Join(dir, "image.json"), m); err != nil {
		t.Fatal(err)
	}
	// The test binary, where nobody may run it.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(filepath.Dir(s.Root()), "images.test")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := asUser(nobody, nobody, "/usr/bin/env", asUserEnv+"="+s.Root(), bin, "-test.run=^TestOpenStoreAsAnotherUserHelper$", "-test.v")
	if err != nil || !strings.Contains(out, "installed: []") {
		t.Errorf("OpenStore as nobody: %v\n%s", err, out)
	}
	if readJSON(filepath.Join(dir, "image.json"), &m); m.SetIDFree {
		t.Error("nobody's open changed root's image")
	}
}

// TestOpenStoreAsAnotherUserHelper is the child of
// TestOpenStoreAsAnotherUserLeavesUnstrippedImagesAlone.
func TestOpenStoreAsAnotherUserHelper(t *testing.T) {
	root := os.Getenv(asUserEnv)
	if root == "" {
		t.Skip("run by TestOpenStoreAsAnotherUserLeavesUnstrippedImagesAlone")
	}
	s, err := OpenStore(Options{Root: root, UIDBase: testBase})
	if err != nil {
		t.Fatalf("OpenStore: %v", err)
	}
	t.Logf("installed: %v", runtimeNames(s.Installed()))
}
