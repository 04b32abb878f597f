package layertar

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/images/imagestest"
)

// applyLayers extracts layers (bottom first) into a new directory.
func applyLayers(t *testing.T, layers ...[]byte) (string, error) {
	t.Helper()
	dest := t.TempDir()
	t.Cleanup(func() { removeTree(dest) })
	lx, err := New(dest, Options{Shift: Shift{Chown: isRoot(), Base: testBase}, Layers: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		if err := lx.Apply(bytes.NewReader(l)); err != nil {
			lx.Close()
			return dest, err
		}
	}
	_, err = lx.Finish()
	return dest, err
}

// treeOf lists dest's paths with a type mark and, for files, their content.
func treeOf(t *testing.T, dest string) []string {
	t.Helper()
	var out []string
	filepath.Walk(dest, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dest {
			return err
		}
		rel, _ := filepath.Rel(dest, p)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out = append(out, rel+" -> "+target)
		case fi.IsDir():
			out = append(out, rel+"/")
		default:
			body, _ := os.ReadFile(p)
			out = append(out, rel+"="+string(body))
		}
		return nil
	})
	slices.Sort(out)
	return out
}

func TestLayersApplyWhiteouts(t *testing.T) {
	base := imagestest.Tar(t, []imagestest.Entry{
		{Name: "etc/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "etc/keep", Type: tar.TypeReg, Mode: 0o644, Body: "v1"},
		{Name: "etc/gone", Type: tar.TypeReg, Mode: 0o644, Body: "x"},
		{Name: "etc/gone-link", Type: tar.TypeSymlink, Link: "/etc/keep"},
		{Name: "opt/tree/a/b/c", Type: tar.TypeReg, Mode: 0o644, Body: "deep"},
		{Name: "opt/tree/d", Type: tar.TypeReg, Mode: 0o644, Body: "d"},
		{Name: "first/old", Type: tar.TypeReg, Mode: 0o644, Body: "o"},
		{Name: "first/sub/old", Type: tar.TypeReg, Mode: 0o644, Body: "o"},
		{Name: "last/old", Type: tar.TypeReg, Mode: 0o644, Body: "o"},
		{Name: "last/sub/old", Type: tar.TypeReg, Mode: 0o644, Body: "o"},
		{Name: "dir-becomes-file/x/y", Type: tar.TypeReg, Mode: 0o644, Body: "y"},
		{Name: "file-becomes-dir", Type: tar.TypeReg, Mode: 0o644, Body: "f"},
		{Name: "usr/lib/libold.so", Type: tar.TypeReg, Mode: 0o644, Body: "lib"},
	})
	upper := imagestest.Tar(t, []imagestest.Entry{
		{Name: "etc/keep", Type: tar.TypeReg, Mode: 0o644, Body: "v2"},
		{Name: "etc/.wh.gone", Type: tar.TypeReg},
		{Name: "etc/.wh.gone-link", Type: tar.TypeReg},
		{Name: "opt/.wh.tree", Type: tar.TypeReg},
		{Name: "etc/.wh.never-existed", Type: tar.TypeReg},
		{Name: "nowhere/.wh.x", Type: tar.TypeReg},
		// Opaque marker before this layer's entries (as docker and
		// buildkit write it) ...
		{Name: "first/.wh..wh..opq", Type: tar.TypeReg},
		{Name: "first/new", Type: tar.TypeReg, Mode: 0o644, Body: "n"},
		// ... and after them: both keep only this layer's entries.
		{Name: "last/sub/new", Type: tar.TypeReg, Mode: 0o644, Body: "n"},
		{Name: "last/.wh..wh..opq", Type: tar.TypeReg},
		{Name: "dir-becomes-file", Type: tar.TypeReg, Mode: 0o644, Body: "now a file"},
		{Name: "file-becomes-dir/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "file-becomes-dir/inside", Type: tar.TypeReg, Mode: 0o644, Body: "i"},
		{Name: "usr/lib/libnew.so", Type: tar.TypeLink, Link: "usr/lib/libold.so"},
		{Name: "etc/.wh..wh.plnk", Type: tar.TypeDir, Mode: 0o700},
	})
	dest, err := applyLayers(t, base, upper)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	want := []string{
		"dir-becomes-file=now a file",
		"etc/", "etc/keep=v2",
		"file-becomes-dir/", "file-becomes-dir/inside=i",
		"first/", "first/new=n",
		"last/", "last/sub/", "last/sub/new=n",
		"opt/",
		"usr/", "usr/lib/", "usr/lib/libnew.so=lib", "usr/lib/libold.so=lib",
	}
	if got := treeOf(t, dest); !slices.Equal(got, want) {
		t.Errorf("tree after two layers:\n got %q\nwant %q", got, want)
	}
}

// A layer cannot reach outside the tree through a symlink an earlier layer
// planted (absolute or relative, or a loop), neither to write, nor with a
// whiteout to delete, nor with an opaque marker to empty a directory.
func TestLayersCannotEscapeThroughSymlinks(t *testing.T) {
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	writeFile(t, victim, []byte("host file"))
	plant := imagestest.Tar(t, []imagestest.Entry{
		{Name: "abs", Type: tar.TypeSymlink, Link: outside},
		{Name: "rel", Type: tar.TypeSymlink, Link: "../../../../../../../../.." + outside},
		{Name: "loop", Type: tar.TypeSymlink, Link: "loop/loop/loop"},
		{Name: "bomb1", Type: tar.TypeSymlink, Link: "bomb2"},
		{Name: "bomb2", Type: tar.TypeSymlink, Link: "bomb1"},
		{Name: "etc/", Type: tar.TypeDir, Mode: 0o755},
	})
	for _, c := range []struct {
		name  string
		layer []imagestest.Entry
	}{
		{"write through absolute symlink", []imagestest.Entry{{Name: "abs/pwned", Type: tar.TypeReg, Mode: 0o644, Body: "x"}}},
		{"write through relative symlink", []imagestest.Entry{{Name: "rel/pwned", Type: tar.TypeReg, Mode: 0o644, Body: "x"}}},
		{"write through a symlink loop", []imagestest.Entry{{Name: "loop/x", Type: tar.TypeReg, Mode: 0o644, Body: "x"}}},
		{"write through a symlink pair", []imagestest.Entry{{Name: "bomb1/x", Type: tar.TypeReg, Mode: 0o644, Body: "x"}}},
		{"directory through a symlink", []imagestest.Entry{{Name: "abs/newdir/", Type: tar.TypeDir, Mode: 0o755}}},
		{"whiteout through a symlink", []imagestest.Entry{{Name: "abs/.wh.victim", Type: tar.TypeReg}}},
		{"opaque through a symlink", []imagestest.Entry{{Name: "abs/.wh..wh..opq", Type: tar.TypeReg}}},
		{"hard link to a host path", []imagestest.Entry{{Name: "etc/h", Type: tar.TypeLink, Link: victim}}},
		{"hard link through a symlink", []imagestest.Entry{{Name: "etc/h", Type: tar.TypeLink, Link: "abs/victim"}}},
		{"dot whiteout", []imagestest.Entry{{Name: "etc/.wh..", Type: tar.TypeReg}}},
		{"dotdot whiteout", []imagestest.Entry{{Name: "etc/.wh...", Type: tar.TypeReg}}},
		{"dotdot whiteout at the top", []imagestest.Entry{{Name: ".wh...", Type: tar.TypeReg}}},
		{"whiteout climbing out", []imagestest.Entry{{Name: "../.wh.victim", Type: tar.TypeReg}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := applyLayers(t, plant, imagestest.Tar(t, c.layer))
			if !errors.Is(err, ErrUnsafeEntry) {
				t.Errorf("err = %v, want ErrUnsafeEntry", err)
			}
			if got := listTree(t, outside); len(got) != 1 || got[0] != victim {
				t.Errorf("outside directory changed: %v", got)
			}
			if body, err := os.ReadFile(victim); err != nil || string(body) != "host file" {
				t.Errorf("victim: %q, %v", body, err)
			}
		})
	}
	// Replacing the planted symlink itself (a whiteout of it, or a file
	// over it) removes the link, never what it points to.
	dest, err := applyLayers(t, plant, imagestest.Tar(t, []imagestest.Entry{
		{Name: ".wh.abs", Type: tar.TypeReg},
		{Name: "rel", Type: tar.TypeReg, Mode: 0o644, Body: "replaced"},
	}))
	if err != nil {
		t.Fatalf("whiteout of the symlink itself: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dest, "abs")); !os.IsNotExist(err) {
		t.Errorf("abs still there: %v", err)
	}
	if body, err := os.ReadFile(victim); err != nil || string(body) != "host file" {
		t.Errorf("victim: %q, %v", body, err)
	}
	if got := listTree(t, outside); len(got) != 1 {
		t.Errorf("outside directory changed: %v", got)
	}
}

// Whiteouts apply to what the layers below left, even deep trees of
// read-only directories (an unprivileged store can still remove them).
func TestLayersWhiteoutReadOnlyTree(t *testing.T) {
	dest, err := applyLayers(t,
		imagestest.Tar(t, []imagestest.Entry{
			{Name: "ro/", Type: tar.TypeDir, Mode: 0o555},
			{Name: "ro/sub/", Type: tar.TypeDir, Mode: 0o555},
			{Name: "ro/sub/f", Type: tar.TypeReg, Mode: 0o444, Body: "f"},
		}),
		imagestest.Tar(t, []imagestest.Entry{{Name: ".wh.ro", Type: tar.TypeReg}}),
	)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if got := treeOf(t, dest); len(got) != 0 {
		t.Errorf("left: %q", got)
	}
}

func TestWhiteoutNames(t *testing.T) {
	for _, bad := range []string{".wh.", ".wh...", "a/.wh."} {
		_, err := applyLayers(t, imagestest.Tar(t, []imagestest.Entry{{Name: bad, Type: tar.TypeReg}}))
		if err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: err = %v, want an error naming it", bad, err)
		}
	}
}
