package layertar

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/scratchrun/scratchrun/internal/images/imagestest"
)

func TestExtractShiftsOwnershipAndKeepsModesButSetID(t *testing.T) {
	dest := t.TempDir()
	// Not as root, the read-only directory ro/ would stop TempDir's
	// cleanup; removeTree opens it up.
	t.Cleanup(func() { removeTree(dest) })
	data := imagestest.Tar(t, []imagestest.Entry{
		{Name: "./", Type: tar.TypeDir, Mode: 0o755},
		{Name: "./etc/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "./etc/file", Type: tar.TypeReg, Mode: 0o644, Body: "hello\n"},
		{Name: "./etc/hard", Type: tar.TypeLink, Link: "./etc/file"},
		{Name: "./etc/link", Type: tar.TypeSymlink, Link: "/etc/file"},
		{Name: "./usr/bin/su", Type: tar.TypeReg, Mode: 0o4755, Body: "#!setuid\n"}, // parent dirs implicit
		{Name: "./usr/bin/wall", Type: tar.TypeReg, Mode: 0o2755, GID: 5, Body: "setgid\n"},
		{Name: "./home/u/", Type: tar.TypeDir, Mode: 0o750, UID: 1000, GID: 1000},
		{Name: "./home/u/notes", Type: tar.TypeReg, Mode: 0o600, UID: 1000, GID: 1000, Body: "n"},
		{Name: "./big", Type: tar.TypeReg, Mode: 0o644, UID: 70000, GID: 99999, Body: "b"},
		{Name: "./tmp/", Type: tar.TypeDir, Mode: 0o1777},
		{Name: "./var/open", Type: tar.TypeReg, Mode: 0o666, Body: "o"},
		{Name: "./ro/", Type: tar.TypeDir, Mode: 0o555},
		{Name: "./ro/inside", Type: tar.TypeReg, Mode: 0o444, Body: "r"},
		{Name: "./dev/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "./dev/null", Type: tar.TypeChar, Mode: 0o666},
		{Name: "./dev/sda", Type: tar.TypeBlock, Mode: 0o660},
		{Name: "./run/fifo", Type: tar.TypeFifo, Mode: 0o600},
		{Name: "./dev/null2", Type: tar.TypeLink, Link: "./dev/null"},
	})
	stats, err := extractTar(bytes.NewReader(data), dest, Shift{Chown: isRoot(), Base: testBase})
	if err != nil {
		t.Fatalf("extract: %v", err)
	}
	if stats.Skipped != 4 || stats.Files != 7 || stats.Symlinks != 1 || stats.Hardlinks != 1 {
		t.Errorf("stats = %+v, want 7 files, 1 symlink, 1 hardlink, 4 skipped", stats)
	}

	// Owned by shifted ids, a shifted image has nothing host users may
	// write: they are all "other" to it.
	worldWritable := os.FileMode(0o002)
	if isRoot() {
		worldWritable = 0
	}
	type want struct {
		path     string
		mode     os.FileMode // permission + special bits
		uid, gid int         // before shifting
	}
	for _, w := range []want{
		{".", 0o755, 0, 0},
		{"etc", 0o755, 0, 0},
		{"etc/file", 0o644, 0, 0},
		{"usr", 0o755, 0, 0}, // implicit parent
		// Set-id bits never reach the store (see fileMode).
		{"usr/bin/su", 0o755, 0, 0},
		{"usr/bin/wall", 0o755, 0, 5},
		{"home/u", 0o750, 1000, 1000},
		{"home/u/notes", 0o600, 1000, 1000},
		{"big", 0o644, 65534, 65534},
		{"tmp", 0o775 | worldWritable | os.ModeSticky, 0, 0},
		{"var/open", 0o664 | worldWritable, 0, 0},
		{"ro", 0o555, 0, 0},
	} {
		fi, err := os.Lstat(filepath.Join(dest, w.path))
		if err != nil {
			t.Errorf("%s: %v", w.path, err)
			continue
		}
		if got := fi.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky); got != w.mode {
			t.Errorf("%s: mode %v, want %v", w.path, got, w.mode)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if isRoot() {
			if st.Uid != testBase+uint32(w.uid) || st.Gid != testBase+uint32(w.gid) {
				t.Errorf("%s: owner %d:%d, want %d:%d", w.path, st.Uid, st.Gid, testBase+uint32(w.uid), testBase+uint32(w.gid))
			}
		} else if st.Uid != uint32(os.Geteuid()) {
			t.Errorf("%s: owner %d, want the caller %d", w.path, st.Uid, os.Geteuid())
		}
		if w.path != "usr" && !fi.ModTime().Equal(imagestest.ModTime) {
			t.Errorf("%s: mtime %v, want %v", w.path, fi.ModTime(), imagestest.ModTime)
		}
	}

	if target, err := os.Readlink(filepath.Join(dest, "etc/link")); err != nil || target != "/etc/file" {
		t.Errorf("symlink: %q, %v; want /etc/file", target, err)
	}
	if isRoot() {
		fi, _ := os.Lstat(filepath.Join(dest, "etc/link"))
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != testBase {
			t.Errorf("symlink owner %d, want %d", st.Uid, testBase)
		}
	}
	a, _ := os.Stat(filepath.Join(dest, "etc/file"))
	b, err := os.Stat(filepath.Join(dest, "etc/hard"))
	if err != nil || !os.SameFile(a, b) {
		t.Errorf("etc/hard is not a hard link of etc/file (%v)", err)
	}
	if body, _ := os.ReadFile(filepath.Join(dest, "etc/hard")); string(body) != "hello\n" {
		t.Errorf("hard link content %q", body)
	}
	for _, p := range []string{"dev/null", "dev/null2", "dev/sda", "run/fifo"} {
		if _, err := os.Lstat(filepath.Join(dest, p)); !os.IsNotExist(err) {
			t.Errorf("%s exists (err %v): device nodes and fifos must be skipped", p, err)
		}
	}
}

func TestExtractRootWithoutDotEntryIsShifted(t *testing.T) {
	if !isRoot() {
		t.Skip("ownership shifting needs root")
	}
	dest := t.TempDir()
	data := imagestest.Tar(t, []imagestest.Entry{{Name: "bin/sh", Type: tar.TypeReg, Mode: 0o755, Body: "x"}})
	if _, err := extractTar(bytes.NewReader(data), dest, Shift{Chown: true, Base: testBase}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".", "bin"} {
		fi, _ := os.Stat(filepath.Join(dest, p))
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != testBase || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: owner %d mode %v, want %d 0755", p, st.Uid, fi.Mode(), testBase)
		}
	}
}

func TestExtractHostileTarballs(t *testing.T) {
	// The canary lives in /etc only if /etc is writable (root); the test
	// checks it is never created there through an "etc -> /etc" symlink.
	const etcCanary = "scratchrun-extract-escape-test"
	cases := []struct {
		name    string
		entries func(outside string) []imagestest.Entry
		unsafe  bool // want ErrUnsafeEntry (else: must succeed harmlessly)
	}{
		{"symlink to /etc then a file through it", func(string) []imagestest.Entry {
			return []imagestest.Entry{
				{Name: "etc", Type: tar.TypeSymlink, Link: "/etc"},
				{Name: "etc/" + etcCanary, Type: tar.TypeReg, Mode: 0o644, Body: "pwned"},
			}
		}, true},
		{"absolute symlink to outside dir, then file through it", func(outside string) []imagestest.Entry {
			return []imagestest.Entry{
				{Name: "etc", Type: tar.TypeSymlink, Link: outside},
				{Name: "etc/passwd", Type: tar.TypeReg, Mode: 0o644, Body: "pwned"},
			}
		}, true},
		{"relative symlink escaping, then dir through it", func(outside string) []imagestest.Entry {
			return []imagestest.Entry{
				{Name: "a/", Type: tar.TypeDir, Mode: 0o755},
				{Name: "a/up", Type: tar.TypeSymlink, Link: "../../../../../../../../" + outside},
				{Name: "a/up/newdir/", Type: tar.TypeDir, Mode: 0o755},
			}
		}, true},
		{"dot-dot name", func(string) []imagestest.Entry {
			return []imagestest.Entry{{Name: "../escape", Type: tar.TypeReg, Mode: 0o644, Body: "x"}}
		}, true},
		{"dot-dot in the middle", func(string) []imagestest.Entry {
			return []imagestest.Entry{{Name: "a/../../escape", Type: tar.TypeReg, Mode: 0o644, Body: "x"}}
		}, true},
		{"absolute name", func(outside string) []imagestest.Entry {
			return []imagestest.Entry{{Name: outside + "/abs", Type: tar.TypeReg, Mode: 0o644, Body: "x"}}
		}, true},
		{"hard link to a file outside", func(outside string) []imagestest.Entry {
			return []imagestest.Entry{{Name: "h", Type: tar.TypeLink, Link: "../" + filepath.Base(outside) + "/secret"}}
		}, true},
		{"hard link through a symlinked dir", func(outside string) []imagestest.Entry {
			return []imagestest.Entry{
				{Name: "l", Type: tar.TypeSymlink, Link: outside},
				{Name: "h", Type: tar.TypeLink, Link: "l/secret"},
			}
		}, true},
		{"file over a symlink replaces the symlink", func(outside string) []imagestest.Entry {
			return []imagestest.Entry{
				{Name: "x", Type: tar.TypeSymlink, Link: outside + "/target"},
				{Name: "x", Type: tar.TypeReg, Mode: 0o644, Body: "inside"},
			}
		}, false},
		{"dir over a symlink replaces the symlink", func(outside string) []imagestest.Entry {
			return []imagestest.Entry{
				{Name: "d", Type: tar.TypeSymlink, Link: outside},
				{Name: "d/", Type: tar.TypeDir, Mode: 0o755},
				{Name: "d/f", Type: tar.TypeReg, Mode: 0o644, Body: "inside"},
			}
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			dest := filepath.Join(base, "root")
			outside := filepath.Join(base, "outside")
			for _, d := range []string{dest, outside} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			writeFile(t, filepath.Join(outside, "secret"), []byte("secret"))
			data := imagestest.Tar(t, tc.entries(outside))
			_, err := extractTar(bytes.NewReader(data), dest, Shift{Chown: isRoot(), Base: testBase})
			if tc.unsafe && !errors.Is(err, ErrUnsafeEntry) {
				t.Errorf("err = %v, want ErrUnsafeEntry", err)
			}
			if !tc.unsafe && err != nil {
				t.Errorf("err = %v, want success", err)
			}
			if got := listTree(t, outside); len(got) != 1 || filepath.Base(got[0]) != "secret" {
				t.Errorf("outside dir changed: %v", got)
			}
			if body, _ := os.ReadFile(filepath.Join(outside, "secret")); string(body) != "secret" {
				t.Errorf("outside file changed: %q", body)
			}
			if _, err := os.Lstat(filepath.Join("/etc", etcCanary)); err == nil {
				os.Remove(filepath.Join("/etc", etcCanary))
				t.Fatalf("wrote /etc/%s on the host", etcCanary)
			}
			if _, err := os.Lstat(filepath.Join(base, "escape")); err == nil {
				t.Errorf("wrote %s/escape outside the root", base)
			}
		})
	}
}

func TestCleanName(t *testing.T) {
	for in, want := range map[string]string{"./": ".", ".": ".", "./usr/bin/": "usr/bin", "a//b": "a/b", "a/./b": "a/b"} {
		got, err := cleanName(in)
		if err != nil || got != want {
			t.Errorf("cleanName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "/", "/etc", "..", "a/..", "../a", "a/../b", "a\x00b"} {
		if _, err := cleanName(in); !errors.Is(err, ErrUnsafeEntry) {
			t.Errorf("cleanName(%q) err = %v, want ErrUnsafeEntry", in, err)
		}
	}
}
