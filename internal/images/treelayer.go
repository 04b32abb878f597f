package images

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/images/layertar"
)

// treeLayer is an image tree of the store as one OCI layer: a gzipped tar
// in a temporary file, written once, with its digests computed as it was
// written (a registry upload and a layout write each read it again).
type treeLayer struct {
	file           string
	digest, diffID v1.Hash
	size           int64
}

// writeTreeLayer writes the tree at rootfs as a layer into a temporary
// file of dir. Ownership is shifted back by base (the image's uid base:
// the store's files belong to base+N, the layer's to N; an id outside the
// image's range is nobody's, as the extractor maps it). The tar is the
// same for the same tree: entries in WalkDir's (lexical) order, no
// names of users, mtimes to the second, no access or change times, and
// nothing the extractor drops (device nodes, fifos, sockets, xattrs), so
// a tree pulled back from the layer gives the same layer again.
func writeTreeLayer(rootfs, dir string, base uint32, progress io.Writer) (_ *treeLayer, err error) {
	f, err := os.CreateTemp(dir, "scratchrun-layer-*.tar.gz")
	if err != nil {
		return nil, fmt.Errorf("layer file: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	compressed := sha256.New()
	counted := &countingHash{h: compressed}
	zw, err := gzip.NewWriterLevel(io.MultiWriter(f, counted), gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	uncompressed := sha256.New()
	tw := tar.NewWriter(io.MultiWriter(zw, uncompressed))
	start := time.Now()
	var files int
	links := map[uint64]string{} // inode -> first name, for hard links
	err = filepath.WalkDir(rootfs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(rootfs, p)
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		hdr := &tar.Header{
			Name:    filepath.ToSlash(rel),
			Mode:    int64(st.Mode & 0o7777),
			Uid:     unshift(st.Uid, base),
			Gid:     unshift(st.Gid, base),
			ModTime: time.Unix(st.Mtim.Sec, 0),
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
			if rel == "." {
				hdr.Name = "./"
			}
		case unix.S_IFLNK:
			hdr.Typeflag = tar.TypeSymlink
			if hdr.Linkname, err = os.Readlink(p); err != nil {
				return err
			}
		case unix.S_IFREG:
			if first, ok := links[st.Ino]; ok && st.Nlink > 1 {
				hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
				break
			}
			if st.Nlink > 1 {
				links[st.Ino] = hdr.Name
			}
			hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size
		default:
			return nil // the extractor skips them: a pull would not have them
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			files++
			if err := copyFileTo(tw, p, hdr.Size); err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
		}
		return nil
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("layer of %s: %w", rootfs, err)
	}
	l := &treeLayer{
		file:   f.Name(),
		digest: v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", compressed.Sum(nil))},
		diffID: v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", uncompressed.Sum(nil))},
		size:   counted.n,
	}
	fmt.Fprintf(progress, "  layer %s: %d files, %.1f MB compressed in %.1fs\n", l.digest, files, float64(l.size)/1e6, time.Since(start).Seconds())
	return l, nil
}

// unshift maps a store id back to the image's: base+N is N.
func unshift(id, base uint32) int {
	if id >= base && uint64(id) < uint64(base)+layertar.IDRange {
		return int(id - base)
	}
	return 65534 // nobody, as the extractor maps ids beyond the range
}

// copyFileTo copies the size bytes of the regular file p into w, opening
// it without following a symlink: the tree is read as it is.
func copyFileTo(w io.Writer, p string, size int64) error {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	n, err := io.CopyN(w, f, size)
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("changed while read: %d bytes of %d", n, size)
	}
	return err
}

// remove deletes the layer's file.
func (l *treeLayer) remove() { os.Remove(l.file) }

// Digest implements v1.Layer.
func (l *treeLayer) Digest() (v1.Hash, error) { return l.digest, nil }

// DiffID implements v1.Layer.
func (l *treeLayer) DiffID() (v1.Hash, error) { return l.diffID, nil }

// Size implements v1.Layer.
func (l *treeLayer) Size() (int64, error) { return l.size, nil }

// MediaType implements v1.Layer.
func (l *treeLayer) MediaType() (types.MediaType, error) { return types.OCILayer, nil }

// Compressed implements v1.Layer.
func (l *treeLayer) Compressed() (io.ReadCloser, error) { return os.Open(l.file) }

// Uncompressed implements v1.Layer.
func (l *treeLayer) Uncompressed() (io.ReadCloser, error) {
	f, err := os.Open(l.file)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return readCloser{zr, func() error { zr.Close(); return f.Close() }}, nil
}

// readCloser is a reader with its own Close.
type readCloser struct {
	io.Reader
	close func() error
}

// Close implements io.Closer.
func (r readCloser) Close() error { return r.close() }
