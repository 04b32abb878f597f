package images

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// An image's files are owned by the sandboxes' root on the host (the uid
// base) or by ids above it, in a directory every host user may read (an
// ordinary user's rootless engine runs root's images), on a file system
// that honours set-id bits. So no file in the store may have a set-id bit:
// fileMode strips them as images are written, stripSetIDOnOpen from images
// written before, and an image not known to be stripped is not used
// (refreshLocked).

// stripSetIDOnOpen removes the set-id bits of every image written before
// the store stripped them (image.json without setid_free), in place: that
// is what a rebuild would give, without the network and the minutes. It
// takes the store lock only when some image needs it, so that opening a
// store never waits for a build otherwise.
func (s *Store) stripSetIDOnOpen() error {
	if len(s.imagesWithSetID()) == 0 {
		return nil
	}
	if !s.ownsImages() {
		// Another user's store (an ordinary user running root's
		// images): only its owner may change it. Its unstripped images
		// are not used until then.
		return nil
	}
	unlock, err := s.lock(context.Background(), io.Discard)
	if err != nil {
		return err
	}
	defer unlock()
	for _, dir := range s.imagesWithSetID() {
		metaPath := filepath.Join(dir, "image.json")
		var m imageMeta
		if err := readJSON(metaPath, &m); err != nil {
			continue
		}
		n, err := stripSetID(filepath.Join(dir, "rootfs"))
		if err != nil {
			return fmt.Errorf("remove set-id bits from %s: %w", dir, err)
		}
		m.SetIDFree = true
		if err := writeJSONAtomic(metaPath, m); err != nil {
			return fmt.Errorf("remove set-id bits from %s: %w", dir, err)
		}
		slog.Info("images: removed the set-id bits of an image written before the store stripped them", "dir", dir, "files", n)
	}
	return nil
}

// ownsImages reports whether this process may change the store's images:
// it is root, or it owns the images directory.
func (s *Store) ownsImages() bool {
	if os.Geteuid() == 0 {
		return true
	}
	var st unix.Stat_t
	return unix.Stat(s.imagesDir, &st) == nil && st.Uid == uint32(os.Geteuid())
}

// imagesWithSetID lists the image directories whose image.json does not
// say their set-id bits were stripped.
func (s *Store) imagesWithSetID() []string {
	entries, err := os.ReadDir(s.imagesDir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		dir := filepath.Join(s.imagesDir, e.Name())
		var m imageMeta
		if readJSON(filepath.Join(dir, "image.json"), &m) == nil && !m.SetIDFree {
			out = append(out, dir)
		}
	}
	return out
}

// stripSetID clears the set-user-ID and set-group-ID bits of every
// non-directory under rootfs and returns how many it changed. The walk only
// reads; each change is made through a descriptor opened beneath rootfs
// without following any symlink, so a tree changed under the walk cannot
// send a chmod outside it.
func stripSetID(rootfs string) (int, error) {
	root, err := unix.Open(rootfs, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(root)
	changed := 0
	err = filepath.WalkDir(rootfs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if info.Mode()&(fs.ModeSetuid|fs.ModeSetgid) == 0 {
			return nil
		}
		rel, err := filepath.Rel(rootfs, p)
		if err != nil {
			return err
		}
		how := unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
		}
		fd, err := unix.Openat2(root, rel, &how)
		if err != nil {
			return fmt.Errorf("open %s: %w", rel, err)
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fmt.Errorf("stat %s: %w", rel, err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return nil
		}
		if err := unix.Fchmod(fd, st.Mode&0o7777&^(unix.S_ISUID|unix.S_ISGID)); err != nil {
			return fmt.Errorf("chmod %s: %w", rel, err)
		}
		changed++
		return nil
	})
	return changed, err
}
