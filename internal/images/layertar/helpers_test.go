package layertar

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// testBase is the uid base the tests shift by.
const testBase uint32 = 1500000000

// extractTar writes one rootfs tarball into dest, as an image import does.
func extractTar(r io.Reader, dest string, shift Shift) (Stats, error) {
	x, err := New(dest, Options{Shift: shift})
	if err != nil {
		return Stats{}, err
	}
	if err := x.Apply(r); err != nil {
		x.Close()
		return x.stats, err
	}
	return x.Finish()
}

// removeTree removes a tree an extraction wrote: not as root, read-only
// directories are opened up first (os.RemoveAll never follows symlinks).
func removeTree(p string) error {
	if err := os.RemoveAll(p); err == nil {
		return nil
	}
	filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(q, 0o700)
		}
		return nil
	})
	return os.RemoveAll(p)
}

func writeFile(t *testing.T, path string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// listTree returns every path under dir, to check nothing was written.
func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil && p != dir {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func isRoot() bool { return os.Geteuid() == 0 }
