package layertar

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
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

// layerEntry writes one entry of a stream: with Options.Layers a whiteout
// is applied as it comes, and never through a symlink, so a layer cannot
// delete anything outside the tree either.
func (x *Extractor) layerEntry(hdr *tar.Header, r io.Reader) error {
	if !x.opts.Layers {
		return x.entry(hdr, r)
	}
	name, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	base := path.Base(name)
	switch {
	case base == opaqueWhiteout:
		return x.opaque(path.Dir(name))
	case strings.HasPrefix(base, whiteoutMeta):
		// aufs' own bookkeeping (.wh..wh.plnk, ...), which Docker
		// skips too.
		return nil
	case strings.HasPrefix(base, whiteoutPrefix):
		return x.whiteout(path.Dir(name), strings.TrimPrefix(base, whiteoutPrefix))
	default:
		return x.entry(hdr, r)
	}
}

// touch records that the current layer created name (and so its parents).
func (x *Extractor) touch(name string) {
	for name != "." && !x.touched[name] {
		x.touched[name] = true
		name = path.Dir(name)
	}
}

// openDir opens directory dir of the tree (never through a symlink); ok is
// false when it does not exist, so there is nothing below it to delete.
func (x *Extractor) openDir(dir string) (fd int, ok bool, err error) {
	if dir == "." {
		fd, err = unix.Dup(x.root)
		return fd, err == nil, err
	}
	fd, err = x.beneath(dir, unix.O_RDONLY|unix.O_DIRECTORY)
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
func (x *Extractor) whiteout(dir, base string) error {
	if base == "" || base == "." || base == ".." || strings.HasPrefix(base, whiteoutPrefix) {
		return fmt.Errorf("%w: whiteout of %q", ErrUnsafeEntry, base)
	}
	name := path.Join(dir, base)
	pfd, ok, err := x.openDir(dir)
	if err != nil || !ok {
		return err
	}
	defer unix.Close(pfd)
	x.dropCache()
	if err := removeAllAt(pfd, base); err != nil {
		return fmt.Errorf("whiteout: %w", err)
	}
	delete(x.dirs, name)
	delete(x.skipped, name)
	x.forgetBelow(name)
	return nil
}

// opaque hides what the layers below put in dir: everything under it that
// this layer did not create goes, whether the marker comes before or after
// this layer's own entries there.
func (x *Extractor) opaque(dir string) error {
	fd, ok, err := x.openDir(dir)
	if err != nil || !ok {
		return err
	}
	defer unix.Close(fd)
	x.dropCache()
	return x.keepTouched(fd, dir)
}

// keepTouched removes the entries of the open directory fd (path dir) that
// the current layer did not create, descending into the ones it did.
func (x *Extractor) keepTouched(fd int, dir string) error {
	names, err := readDirNames(fd)
	if err != nil {
		return err
	}
	for _, n := range names {
		p := n
		if dir != "." {
			p = dir + "/" + n
		}
		if !x.touched[p] {
			if err := removeAllAt(fd, n); err != nil {
				return fmt.Errorf("opaque whiteout of %s: %w", dir, err)
			}
			delete(x.dirs, p)
			delete(x.skipped, p)
			x.forgetBelow(p)
			continue
		}
		child, err := unix.Openat(fd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			continue // this layer's own file or symlink
		}
		if err != nil {
			return fmt.Errorf("opaque whiteout of %s: %w", dir, err)
		}
		err = x.keepTouched(child, p)
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
