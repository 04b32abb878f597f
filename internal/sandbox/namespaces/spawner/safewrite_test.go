package spawner

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The session init's safe writer (c/session.c), run on a directory standing
// in for the sandbox's root: it makes missing parents, follows a link only
// within the root (an absolute one resolves below it), and refuses a link, a fifo or a directory in the file's
// place, a magic link's target, and a path that names no file. (Within a
// sandbox, TestSessionFilesBetweenJobs in package namespaces adds /proc.)
func TestSafeWrite(t *testing.T) {
	self, err := filepath.Abs(filepath.Join("testdata", "safewrite.c"))
	if err != nil {
		t.Fatal(err)
	}
	bin := buildC(t, "safewrite", self, "session.c", "kernel.c", "job.c", "wire.c", "util.c", "confine.c", "zygote.c")
	root := t.TempDir()
	for _, dir := range []string{"tmp", "sub"} {
		if err := os.Mkdir(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, []byte("untouched"), 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{"tmp/abs": outside, "tmp/up": "../../../sub", "tmp/out": filepath.Dir(outside), "tmp/magic": "/proc/self/root"}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(root, "tmp/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(path string) string {
		out, err := exec.Command(bin, root, path, "hello").Output()
		if err != nil {
			t.Fatalf("safewrite %s: %v", path, err)
		}
		return strings.TrimSpace(string(out))
	}
	for path, where := range map[string]string{
		"/a.txt":              "a.txt",
		"/tmp/new/deep/f.bin": "tmp/new/deep/f.bin",
		"/tmp/up/x":           "sub/x", // "../../.." stops at the root
	} {
		if got := write(path); got != "ok" {
			t.Errorf("write %s: %s", path, got)
			continue
		}
		if data, err := os.ReadFile(filepath.Join(root, where)); err != nil || string(data) != "hello" {
			t.Errorf("write %s: %s holds %q, %v", path, where, data, err)
		}
	}
	// /tmp/out leads to the outside file's directory as the root sees it:
	// nothing there, and the writer makes no directory through a link.
	for _, path := range []string{"/tmp/abs", "/tmp/out/outside", "/tmp/fifo", "/tmp/magic/x", "/tmp", "/tmp/", "relative"} {
		if got := write(path); got == "ok" {
			t.Errorf("write %s was not refused", path)
		}
	}
	if data, _ := os.ReadFile(outside); string(data) != "untouched" {
		t.Errorf("a file outside the root was written: %q", data)
	}
}
