package layertar

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/scratchrun/scratchrun/internal/images/imagestest"
)

// fuzzMaxWrite bounds the file contents one fuzzed extraction may write: a
// sparse entry of a few header bytes can declare gigabytes of holes, which
// the extractor writes out (a pull bounds that with Options.Charge too).
const fuzzMaxWrite = 1 << 20

// FuzzExtract writes tarballs built from a small script (see scriptTars)
// into a target directory beside a sentinel directory, as one rootfs
// tarball or, layered, as an image's layers. Whatever the entries, the
// extraction may fail but must not panic, and nothing outside the target
// may change: the parent still holds only the target and the sentinel, and
// the sentinel its one file, unchanged and with no new hard link. Inside,
// no file keeps a set-id bit, nothing is a device node or fifo, and (as
// root, where ownership is shifted) nothing is world-writable. It needs no
// root: as an ordinary user ownership is not shifted. The seeds, in
// testdata/fuzz/FuzzExtract, are the valid trees and the hostile cases of
// this package's tests.
func FuzzExtract(f *testing.F) {
	f.Fuzz(func(t *testing.T, layered bool, script string) {
		base, root, outside := fuzzDirs(t)
		streams, ok := scriptTars(script, outside)
		if !ok {
			return
		}
		readers := make([]io.Reader, len(streams))
		for i, s := range streams {
			readers[i] = bytes.NewReader(s)
		}
		extractFuzzed(t, root, layered, readers)
		checkContained(t, base, root, outside)
	})
}

// FuzzExtractStream feeds raw bytes to the extractor as a tar stream, for
// what a script cannot write (GNU and PAX headers, sparse maps, bad
// checksums, streams cut short), with the properties of FuzzExtract.
func FuzzExtractStream(f *testing.F) {
	f.Add(false, imagestest.Tar(f, []imagestest.Entry{
		{Name: "./", Type: tar.TypeDir, Mode: 0o755},
		{Name: "etc/file", Type: tar.TypeReg, Mode: 0o4755, Body: "x"},
		{Name: "etc/link", Type: tar.TypeSymlink, Link: "/etc/file"},
		{Name: "etc/hard", Type: tar.TypeLink, Link: "etc/file"},
		{Name: "dev/null", Type: tar.TypeChar, Mode: 0o666},
	}))
	f.Add(true, imagestest.Tar(f, []imagestest.Entry{
		{Name: "etc/.wh.gone", Type: tar.TypeReg},
		{Name: "opt/.wh..wh..opq", Type: tar.TypeReg},
		{Name: "l", Type: tar.TypeSymlink, Link: ".."},
		{Name: "l/x", Type: tar.TypeReg, Body: "x"},
	}))
	f.Fuzz(func(t *testing.T, layered bool, stream []byte) {
		base, root, outside := fuzzDirs(t)
		extractFuzzed(t, root, layered, []io.Reader{bytes.NewReader(stream)})
		checkContained(t, base, root, outside)
	})
}

// fuzzDirs makes base/root, the target, and base/outside, the sentinel
// directory holding one file, secret.
func fuzzDirs(t *testing.T) (base, root, outside string) {
	base = t.TempDir()
	t.Cleanup(func() { removeTree(base) })
	root, outside = filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{root, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(outside, "secret"), []byte("secret"))
	return base, root, outside
}

// extractFuzzed applies streams to root as the store would (shifted only
// as root), the file contents bounded by fuzzMaxWrite; errors are fine.
func extractFuzzed(t *testing.T, root string, layered bool, streams []io.Reader) {
	written := 0
	charge := func(n int) error {
		if written += n; written > fuzzMaxWrite {
			return io.ErrShortWrite
		}
		return nil
	}
	x, err := New(root, Options{Shift: Shift{Chown: isRoot(), Base: testBase}, Layers: layered, Charge: charge})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range streams {
		if err := x.Apply(s); err != nil {
			x.Close()
			return
		}
	}
	x.Finish()
}

// checkContained checks the properties of FuzzExtract.
func checkContained(t *testing.T, base, root, outside string) {
	t.Helper()
	entries, err := os.ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"outside", "root"}) {
		t.Fatalf("the target's parent holds %q, want only outside and root", names)
	}
	if got := listTree(t, outside); len(got) != 1 || filepath.Base(got[0]) != "secret" {
		t.Fatalf("the sentinel directory changed: %q", got)
	}
	secret := filepath.Join(outside, "secret")
	fi, err := os.Lstat(secret)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Nlink != 1 || fi.Mode() != 0o644 || st.Uid != uint32(os.Geteuid()) {
		t.Fatalf("the sentinel file changed: %d links, mode %v, owner %d", st.Nlink, fi.Mode(), st.Uid)
	}
	if body, err := os.ReadFile(secret); err != nil || string(body) != "secret" {
		t.Fatalf("the sentinel file changed: %q, %v", body, err)
	}
	fi, err = os.Lstat(root)
	if err != nil || !fi.IsDir() {
		t.Fatalf("the target is no longer a directory: %v, %v", fi, err)
	}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // an unfinished read-only directory, as an ordinary user
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		m := fi.Mode()
		switch {
		case m.Type()&^(fs.ModeDir|fs.ModeSymlink) != 0:
			t.Errorf("%s: a %v in the tree", p, m.Type())
		case !m.IsDir() && m&(fs.ModeSetuid|fs.ModeSetgid) != 0:
			t.Errorf("%s: kept a set-id bit (%v)", p, m)
		case isRoot() && m.Type() != fs.ModeSymlink && m.Perm()&0o002 != 0:
			t.Errorf("%s: world-writable in a shifted tree (%v)", p, m)
		}
		return nil
	})
}

// scriptTars builds the tar streams a script describes, one per layer.
// Each line is an entry, "TYPE[MODE][:UID[:GID]] NAME [ARG]": TYPE is d
// (directory), f (file, ARG its contents), l (symlink to ARG), h (hard link
// to ARG), c, b, p (device nodes, fifo) or o (an entry of an unknown type);
// MODE is octal. A line "--" starts the next layer. $OUT in a name or an
// argument is the sentinel directory. An absolute name or link target
// elsewhere is moved under the sentinel directory, so that an escape a
// fuzzer found while running as root would land there, where it is seen,
// and not in the host's /etc. ok is false for a script tar cannot write.
func scriptTars(script, outside string) (streams [][]byte, ok bool) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	end := func() bool {
		if tw.Close() != nil {
			return false
		}
		streams = append(streams, bytes.Clone(buf.Bytes()))
		buf.Reset()
		tw = tar.NewWriter(&buf)
		return true
	}
	place := func(s string) string {
		s = strings.ReplaceAll(s, "$OUT", outside)
		if strings.HasPrefix(s, "/") && !strings.HasPrefix(s, outside) {
			s = outside + s
		}
		return s
	}
	for line := range strings.SplitSeq(script, "\n") {
		if line == "--" {
			if !end() {
				return nil, false
			}
			continue
		}
		fields := strings.SplitN(line, " ", 3)
		if len(fields) < 2 || fields[0] == "" {
			continue
		}
		hdr, body := scriptHeader(fields[0])
		hdr.Name = place(fields[1])
		if len(fields) == 3 {
			switch hdr.Typeflag {
			case tar.TypeSymlink, tar.TypeLink:
				hdr.Linkname = place(fields[2])
			case tar.TypeReg:
				body = fields[2]
			}
		}
		if hdr.Typeflag == tar.TypeReg {
			hdr.Size = int64(len(body))
		}
		if tw.WriteHeader(hdr) != nil {
			return nil, false
		}
		if _, err := io.WriteString(tw, body); err != nil {
			return nil, false
		}
	}
	return streams, end()
}

// scriptHeader reads an entry's TYPE[MODE][:UID[:GID]].
func scriptHeader(spec string) (*tar.Header, string) {
	types := map[byte]byte{'d': tar.TypeDir, 'f': tar.TypeReg, 'l': tar.TypeSymlink, 'h': tar.TypeLink,
		'c': tar.TypeChar, 'b': tar.TypeBlock, 'p': tar.TypeFifo, 'o': 'Z'}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Mode: 0o644, ModTime: imagestest.ModTime, Format: tar.FormatPAX}
	if t, ok := types[spec[0]]; ok {
		hdr.Typeflag = t
		if t == tar.TypeDir {
			hdr.Mode = 0o755
		}
	}
	parts := strings.Split(spec[1:], ":")
	if m, err := strconv.ParseInt(parts[0], 8, 64); err == nil {
		hdr.Mode = m & 0o7777
	}
	if len(parts) > 1 {
		hdr.Uid, _ = strconv.Atoi(parts[1])
	}
	if len(parts) > 2 {
		hdr.Gid, _ = strconv.Atoi(parts[2])
	}
	return hdr, ""
}
