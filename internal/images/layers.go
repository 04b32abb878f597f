package images

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// Whiteouts, as the OCI image specification defines them: an entry named
// .wh.NAME in a layer deletes NAME of the layers below, and an entry
// .wh..wh..opq hides everything the layers below put in its directory.
const (
	whiteoutPrefix = ".wh."
	opaqueWhiteout = ".wh..wh..opq"
	whiteoutMeta   = ".wh..wh."
)

// layerExtractor applies an image's layers, bottom first, to one directory
// with the store's extractor: the same id shift, mode rules and refusal of
// entries that would leave the tree. Whiteouts are applied as they come,
// and never through a symlink: a layer cannot delete anything outside the
// tree either.
type layerExtractor struct {
	x *extractor
	// touched holds every path the current layer created, with its
	// ancestors: an opaque whiteout keeps exactly those.
	touched map[string]bool
}

// newLayerExtractor prepares dest, an existing empty directory.
func newLayerExtractor(dest string, shift idShift) (*layerExtractor, error) {
	x, err := newExtractor(dest, shift)
	if err != nil {
		return nil, err
	}
	l := &layerExtractor{x: x}
	x.layered = true
	x.written = l.touch
	return l, nil
}

func (l *layerExtractor) touch(name string) {
	for name != "." && !l.touched[name] {
		l.touched[name] = true
		name = path.Dir(name)
	}
}

// apply extracts one layer's (uncompressed) tar stream on top of the layers
// applied before.
func (l *layerExtractor) apply(r io.Reader) error {
	l.touched = map[string]bool{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read tar: %w", err)
		}
		name, err := cleanName(hdr.Name)
		if err != nil {
			return fmt.Errorf("tar entry %q: %w", hdr.Name, err)
		}
		base := path.Base(name)
		switch {
		case base == opaqueWhiteout:
			err = l.opaque(path.Dir(name))
		case strings.HasPrefix(base, whiteoutMeta):
			// aufs' own bookkeeping (.wh..wh.plnk, ...), which Docker
			// skips too.
		case strings.HasPrefix(base, whiteoutPrefix):
			err = l.whiteout(path.Dir(name), strings.TrimPrefix(base, whiteoutPrefix))
		default:
			err = l.x.entry(hdr, tr)
		}
		if err != nil {
			return fmt.Errorf("tar entry %q: %w", hdr.Name, err)
		}
	}
}

// finish applies the directories' owners, modes and times and closes the
// tree; it reports what was extracted (Bytes counts files that later layers
// replaced too: use treeSize for the image's size).
func (l *layerExtractor) finish() (extractStats, error) {
	defer l.x.close()
	err := l.x.finishDirs()
	return l.x.stats, err
}

// close releases the tree without finishing it (after an error).
func (l *layerExtractor) close() { l.x.close() }

// openDir opens directory dir of the tree (never through a symlink); ok is
// false when it does not exist, so there is nothing below it to delete.
func (l *layerExtractor) openDir(dir string) (fd int, ok bool, err error) {
	if dir == "." {
		fd, err = unix.Dup(l.x.root)
		return fd, err == nil, err
	}
	fd, err = l.x.beneath(dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return -1, false, nil
	}
	if err != nil {
		return -1, false, err
	}
	return fd, true, nil
}

// whiteout deletes dir/base (a file, a symlink or a whole tree) left by
// the layers below.
func (l *layerExtractor) whiteout(dir, base string) error {
	if base == "" || base == "." || base == ".." || strings.HasPrefix(base, whiteoutPrefix) {
		return fmt.Errorf("%w: whiteout of %q", ErrUnsafeEntry, base)
	}
	name := path.Join(dir, base)
	pfd, ok, err := l.openDir(dir)
	if err != nil || !ok {
		return err
	}
	defer unix.Close(pfd)
	l.x.dropCache()
	if err := removeAllAt(pfd, base); err != nil {
		return fmt.Errorf("whiteout: %w", err)
	}
	delete(l.x.dirs, name)
	delete(l.x.skipped, name)
	l.x.forgetBelow(name)
	return nil
}

// opaque hides what the layers below put in dir: everything under it that
// this layer did not create goes, whether the marker comes before or after
// this layer's own entries there.
func (l *layerExtractor) opaque(dir string) error {
	fd, ok, err := l.openDir(dir)
	if err != nil || !ok {
		return err
	}
	defer unix.Close(fd)
	l.x.dropCache()
	return l.keepTouched(fd, dir)
}

// keepTouched removes the entries of the open directory fd (path dir) that
// the current layer did not create, descending into the ones it did.
func (l *layerExtractor) keepTouched(fd int, dir string) error {
	names, err := readDirNames(fd)
	if err != nil {
		return err
	}
	for _, n := range names {
		p := n
		if dir != "." {
			p = dir + "/" + n
		}
		if !l.touched[p] {
			if err := removeAllAt(fd, n); err != nil {
				return fmt.Errorf("opaque whiteout of %s: %w", dir, err)
			}
			delete(l.x.dirs, p)
			delete(l.x.skipped, p)
			l.x.forgetBelow(p)
			continue
		}
		child, err := unix.Openat(fd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			continue // this layer's own file or symlink
		}
		if err != nil {
			return fmt.Errorf("opaque whiteout of %s: %w", dir, err)
		}
		err = l.keepTouched(child, p)
		unix.Close(child)
		if err != nil {
			return err
		}
	}
	return nil
}

// removeAllAt removes name in the open directory dirfd and, if it is a
// directory, everything in it. It never follows a symlink: a symlink is
// removed, not what it points to. Written by hand because os.RemoveAll and
// os.Root take paths, and here only a descriptor is trusted.
func removeAllAt(dirfd int, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return fmt.Errorf("%w: remove %q", ErrUnsafeEntry, name)
	}
	err := unix.Unlinkat(dirfd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	if err := removeChildrenAt(dirfd, name); err != nil {
		return err
	}
	if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return nil
}

// removeChildrenAt empties the directory name of dirfd.
func removeChildrenAt(dirfd int, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return fmt.Errorf("%w: empty %q", ErrUnsafeEntry, name)
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", name, err)
	}
	defer unix.Close(fd)
	names, err := readDirNames(fd)
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	for _, n := range names {
		if err := removeAllAt(fd, n); err != nil {
			return fmt.Errorf("%s/%w", name, err)
		}
	}
	return nil
}

// readDirNames lists the open directory fd (without "." and ".."), leaving
// fd open and usable.
func readDirNames(fd int) ([]string, error) {
	dup, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), ".")
	defer f.Close()
	return f.Readdirnames(-1)
}
