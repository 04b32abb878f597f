package images

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// applyLayers extracts layers (bottom first) into a new directory.
func applyLayers(t *testing.T, layers ...[]byte) (string, error) {
	t.Helper()
	dest := t.TempDir()
	t.Cleanup(func() { removeTree(dest) })
	lx, err := newLayerExtractor(dest, idShift{chown: isRoot(), base: testBase})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		if err := lx.apply(bytes.NewReader(l)); err != nil {
			lx.close()
			return dest, err
		}
	}
	_, err = lx.finish()
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
	base := buildTar(t, []tarEntry{
		{name: "etc/", typ: tar.TypeDir, mode: 0o755},
		{name: "etc/keep", typ: tar.TypeReg, mode: 0o644, body: "v1"},
		{name: "etc/gone", typ: tar.TypeReg, mode: 0o644, body: "x"},
		{name: "etc/gone-link", typ: tar.TypeSymlink, link: "/etc/keep"},
		{name: "opt/tree/a/b/c", typ: tar.TypeReg, mode: 0o644, body: "deep"},
		{name: "opt/tree/d", typ: tar.TypeReg, mode: 0o644, body: "d"},
		{name: "first/old", typ: tar.TypeReg, mode: 0o644, body: "o"},
		{name: "first/sub/old", typ: tar.TypeReg, mode: 0o644, body: "o"},
		{name: "last/old", typ: tar.TypeReg, mode: 0o644, body: "o"},
		{name: "last/sub/old", typ: tar.TypeReg, mode: 0o644, body: "o"},
		{name: "dir-becomes-file/x/y", typ: tar.TypeReg, mode: 0o644, body: "y"},
		{name: "file-becomes-dir", typ: tar.TypeReg, mode: 0o644, body: "f"},
		{name: "usr/lib/libold.so", typ: tar.TypeReg, mode: 0o644, body: "lib"},
	})
	upper := buildTar(t, []tarEntry{
		{name: "etc/keep", typ: tar.TypeReg, mode: 0o644, body: "v2"},
		{name: "etc/.wh.gone", typ: tar.TypeReg},
		{name: "etc/.wh.gone-link", typ: tar.TypeReg},
		{name: "opt/.wh.tree", typ: tar.TypeReg},
		{name: "etc/.wh.never-existed", typ: tar.TypeReg},
		{name: "nowhere/.wh.x", typ: tar.TypeReg},
		// Opaque marker before this layer's entries (as docker and
		// buildkit write it) ...
		{name: "first/.wh..wh..opq", typ: tar.TypeReg},
		{name: "first/new", typ: tar.TypeReg, mode: 0o644, body: "n"},
		// ... and after them: both keep only this layer's entries.
		{name: "last/sub/new", typ: tar.TypeReg, mode: 0o644, body: "n"},
		{name: "last/.wh..wh..opq", typ: tar.TypeReg},
		{name: "dir-becomes-file", typ: tar.TypeReg, mode: 0o644, body: "now a file"},
		{name: "file-becomes-dir/", typ: tar.TypeDir, mode: 0o755},
		{name: "file-becomes-dir/inside", typ: tar.TypeReg, mode: 0o644, body: "i"},
		{name: "usr/lib/libnew.so", typ: tar.TypeLink, link: "usr/lib/libold.so"},
		{name: "etc/.wh..wh.plnk", typ: tar.TypeDir, mode: 0o700},
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
	plant := buildTar(t, []tarEntry{
		{name: "abs", typ: tar.TypeSymlink, link: outside},
		{name: "rel", typ: tar.TypeSymlink, link: "../../../../../../../../.." + outside},
		{name: "loop", typ: tar.TypeSymlink, link: "loop/loop/loop"},
		{name: "bomb1", typ: tar.TypeSymlink, link: "bomb2"},
		{name: "bomb2", typ: tar.TypeSymlink, link: "bomb1"},
		{name: "etc/", typ: tar.TypeDir, mode: 0o755},
	})
	for _, c := range []struct {
		name  string
		layer []tarEntry
	}{
		{"write through absolute symlink", []tarEntry{{name: "abs/pwned", typ: tar.TypeReg, mode: 0o644, body: "x"}}},
		{"write through relative symlink", []tarEntry{{name: "rel/pwned", typ: tar.TypeReg, mode: 0o644, body: "x"}}},
		{"write through a symlink loop", []tarEntry{{name: "loop/x", typ: tar.TypeReg, mode: 0o644, body: "x"}}},
		{"write through a symlink pair", []tarEntry{{name: "bomb1/x", typ: tar.TypeReg, mode: 0o644, body: "x"}}},
		{"directory through a symlink", []tarEntry{{name: "abs/newdir/", typ: tar.TypeDir, mode: 0o755}}},
		{"whiteout through a symlink", []tarEntry{{name: "abs/.wh.victim", typ: tar.TypeReg}}},
		{"opaque through a symlink", []tarEntry{{name: "abs/.wh..wh..opq", typ: tar.TypeReg}}},
		{"hard link to a host path", []tarEntry{{name: "etc/h", typ: tar.TypeLink, link: victim}}},
		{"hard link through a symlink", []tarEntry{{name: "etc/h", typ: tar.TypeLink, link: "abs/victim"}}},
		{"dot whiteout", []tarEntry{{name: "etc/.wh..", typ: tar.TypeReg}}},
		{"dotdot whiteout", []tarEntry{{name: "etc/.wh...", typ: tar.TypeReg}}},
		{"dotdot whiteout at the top", []tarEntry{{name: ".wh...", typ: tar.TypeReg}}},
		{"whiteout climbing out", []tarEntry{{name: "../.wh.victim", typ: tar.TypeReg}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := applyLayers(t, plant, buildTar(t, c.layer))
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
	dest, err := applyLayers(t, plant, buildTar(t, []tarEntry{
		{name: ".wh.abs", typ: tar.TypeReg},
		{name: "rel", typ: tar.TypeReg, mode: 0o644, body: "replaced"},
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
		buildTar(t, []tarEntry{
			{name: "ro/", typ: tar.TypeDir, mode: 0o555},
			{name: "ro/sub/", typ: tar.TypeDir, mode: 0o555},
			{name: "ro/sub/f", typ: tar.TypeReg, mode: 0o444, body: "f"},
		}),
		buildTar(t, []tarEntry{{name: ".wh.ro", typ: tar.TypeReg}}),
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
		_, err := applyLayers(t, buildTar(t, []tarEntry{{name: bad, typ: tar.TypeReg}}))
		if err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: err = %v, want an error naming it", bad, err)
		}
	}
}
