package goinit

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// openRoot opens dir as the root safeWrite resolves within.
func openRoot(t *testing.T, dir string) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// safeWrite makes missing parents, follows links only within its root, and
// refuses a link, fifo or directory in the file's place and a parent on a
// kernel pseudo-file system.
func TestSafeWriteStaysInside(t *testing.T) {
	dir := t.TempDir()
	root := openRoot(t, dir)
	if err := safeWrite(root, "/a/b/c.txt", []byte("deep")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "a/b/c.txt")); string(got) != "deep" {
		t.Errorf("a/b/c.txt holds %q", got)
	}
	// An absolute link in a parent resolves within the root, not the host.
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/a", filepath.Join(dir, "toa")); err != nil {
		t.Fatal(err)
	}
	if err := safeWrite(root, "/toa/via-link", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a/via-link")); err != nil {
		t.Errorf("the write through a link inside the root went elsewhere: %v", err)
	}
	_ = safeWrite(root, "/out/escaped", []byte("x"))
	if _, err := os.Stat(filepath.Join(outside, "escaped")); err == nil {
		t.Error("a write followed a link out of the root")
	}
	if err := os.Symlink("a/b/c.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/link", "/fifo", "/a", "relative", "/a/"} {
		if err := safeWrite(root, path, []byte("no")); err == nil {
			t.Errorf("write %s was not refused", path)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "a/b/c.txt")); string(got) != "deep" {
		t.Errorf("a refused write changed the link's target: %q", got)
	}
	host := openRoot(t, "/")
	before, _ := os.ReadFile("/proc/self/comm")
	if err := safeWrite(host, "/proc/self/comm", []byte("changed")); err == nil || !strings.Contains(err.Error(), "pseudo-file system") {
		t.Errorf("a write into /proc: %v", err)
	}
	if after, _ := os.ReadFile("/proc/self/comm"); string(after) != string(before) {
		t.Errorf("comm changed from %q to %q", before, after)
	}
}
