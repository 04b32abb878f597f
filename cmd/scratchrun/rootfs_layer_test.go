package main

import (
	"archive/tar"
	"debug/elf"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/images"
	"github.com/scratchrun/scratchrun/internal/images/imagestest"
)

// projectRootfsLayer is a base layer taken from the project's own image (the
// bash runtime's): bash, cat, ls and id with the libraries they load, laid
// out merged-/usr as Debian does, and an /etc with root and one user; with
// python, Python 3.13 and its standard library too.
func projectRootfsLayer(t *testing.T, python ...bool) []imagestest.Entry {
	t.Helper()
	store, err := images.OpenStore(images.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := store.Resolve("bash")
	if err != nil {
		t.Fatalf("the bash image must be built for these tests: %v", err)
	}
	root := res.RootFS
	entries := []imagestest.Entry{
		{Name: "usr/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "usr/bin/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "usr/lib/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "usr/lib/x86_64-linux-gnu/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "usr/lib64/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "bin", Type: tar.TypeSymlink, Link: "usr/bin"},
		{Name: "lib", Type: tar.TypeSymlink, Link: "usr/lib"},
		{Name: "lib64", Type: tar.TypeSymlink, Link: "usr/lib64"},
		{Name: "usr/lib64/ld-linux-x86-64.so.2", Type: tar.TypeSymlink, Link: "../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"},
		{Name: "etc/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "etc/passwd", Type: tar.TypeReg, Mode: 0o644, Body: "root:x:0:0:root:/root:/bin/bash\napp:x:1000:1000:app:/home/app:/bin/bash\n"},
		{Name: "etc/group", Type: tar.TypeReg, Mode: 0o644, Body: "root:x:0:\napp:x:1000:\n"},
		{Name: "root/", Type: tar.TypeDir, Mode: 0o700},
	}
	added := map[string]bool{}
	var addFile func(rel string)
	addFile = func(rel string) {
		if added[rel] {
			return
		}
		added[rel] = true
		host := resolveIn(t, root, rel)
		data, err := os.ReadFile(host)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, imagestest.Entry{Name: rel, Type: tar.TypeReg, Mode: 0o755, Body: string(data)})
		f, err := elf.Open(host)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		libs, _ := f.ImportedLibraries()
		f.Close()
		for _, lib := range libs {
			addFile("usr/lib/x86_64-linux-gnu/" + lib)
		}
	}
	addFile("usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
	for _, bin := range []string{"bash", "cat", "ls", "id"} {
		addFile("usr/bin/" + bin)
	}
	if len(python) > 0 && python[0] {
		addFile("usr/bin/python3.13")
		entries = append(entries, addTree(t, root, "usr/lib/python3.13")...)
	}
	return entries
}

// addTree adds the tree at rel under root (directories, files, symlinks as
// they are), skipping compiled caches.
func addTree(t *testing.T, root, rel string) []imagestest.Entry {
	t.Helper()
	var out []imagestest.Entry
	err := filepath.WalkDir(filepath.Join(root, rel), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name, _ := filepath.Rel(root, p)
		switch {
		case d.IsDir() && d.Name() == "__pycache__":
			return filepath.SkipDir
		case d.IsDir():
			out = append(out, imagestest.Entry{Name: name + "/", Type: tar.TypeDir, Mode: 0o755})
		case d.Type()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out = append(out, imagestest.Entry{Name: name, Type: tar.TypeSymlink, Link: target})
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out = append(out, imagestest.Entry{Name: name, Type: tar.TypeReg, Mode: 0o644, Body: string(data)})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// resolveIn follows the symlinks of rel inside root, as the sandbox would.
func resolveIn(t *testing.T, root, rel string) string {
	t.Helper()
	for range 16 {
		p := filepath.Join(root, rel)
		target, err := os.Readlink(p)
		if err != nil {
			return p
		}
		if path.IsAbs(target) {
			rel = strings.TrimPrefix(target, "/")
		} else {
			rel = path.Join(path.Dir(rel), target)
		}
	}
	t.Fatalf("%s: too many symlinks", rel)
	return ""
}
