package namespaces

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
	"github.com/scratchrun/scratchrun/internal/sandbox/idmap"
)

// A root engine's sandboxes run as host uids sandboxUIDBase.. (their root
// is sandboxUIDBase), not as the image store's owners (images.
// DefaultUIDBase..): a process of a sandbox that reached the store's
// directory on the host (an escape from its mount namespace) must not be
// able to write image files, which every later sandbox of every tenant
// runs. The sandbox sees its image through an idmapped, read-only mount
// that shows the store's uid UIDBase+N as sandboxUIDBase+N, so its files
// are still root's inside and the overlay still copies them up to write.
// The range lies apart from the images', the user namespace owners'
// (ownerUIDBase) and the microVM backend's QEMU uids (1200000000 on).
const sandboxUIDBase = 1_300_000_000

// ImageViewsDir, below the state directory, holds one directory per
// engine (its instance name) with the idmapped views of the images its
// sandboxes use, made once per image and removed at Close.
const ImageViewsDir = "images"

// lowers are an engine's idmapped views of images, by image directory.
type lowers struct {
	dir   string // <state>/lower/<instance>
	mu    sync.Mutex
	views map[string]*view
}

// view is one image's idmapped mount, and the image directory it shows
// (a store that replaced the directory gets a new view).
type view struct {
	path     string
	dev, ino uint64
	base     uint32
}

func newLowers(stateDir, instance string) *lowers {
	return &lowers{dir: filepath.Join(stateDir, ImageViewsDir, instance), views: map[string]*view{}}
}

// path returns the idmapped view of img for a sandbox to build on, making
// it the first time img is used.
func (l *lowers) path(img sandbox.Image) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(img.RootFS, &st); err != nil {
		return "", fmt.Errorf("image %s: %w", img.RootFS, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if v := l.views[img.RootFS]; v != nil {
		if v.dev == st.Dev && v.ino == st.Ino && v.base == img.UIDBase {
			return v.path, nil
		}
		// Sandboxes built on the old view keep it in their own mount
		// namespaces; the host's copy only served new ones.
		if err := removeView(v.path); err != nil {
			return "", err
		}
		delete(l.views, img.RootFS)
	}
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return "", err
	}
	// Backends of one process share its instance name: each view gets a
	// directory of its own.
	dir, err := os.MkdirTemp(l.dir, "")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		os.Remove(dir)
		return "", err
	}
	// Read-only: the sandbox writes through its overlay's upper layer, and
	// a sandbox's uid that reached this mount on the host must not write
	// the image through it. Set-id files (the store strips them anyway)
	// and device nodes do nothing through it.
	tree, err := idmap.Tree(img.RootFS, img.UIDBase, sandboxUIDBase, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		os.Remove(dir)
		return "", fmt.Errorf("show image %s to sandboxes' uids: %w", img.RootFS, err)
	}
	err = unix.MoveMount(int(tree.Fd()), "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH)
	tree.Close()
	if err != nil {
		os.Remove(dir)
		return "", fmt.Errorf("mount the idmapped view of %s: %w", img.RootFS, err)
	}
	l.views[img.RootFS] = &view{path: dir, dev: st.Dev, ino: st.Ino, base: img.UIDBase}
	return dir, nil
}

// close removes every view and the engine's directory.
func (l *lowers) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for root, v := range l.views {
		errs = append(errs, removeView(v.path))
		delete(l.views, root)
	}
	// Another backend of this process may still have views there.
	if err := os.Remove(l.dir); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, unix.ENOTEMPTY) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeView unmounts a view and removes its directory.
func removeView(dir string) error {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// sweepLowers removes the views of engines that no longer run (killed
// before Close) and counts those engines; a live engine's are never
// touched (hostside.InstanceAlive).
func sweepLowers(stateDir string) (int, error) {
	engines, _ := filepath.Glob(filepath.Join(stateDir, ImageViewsDir, "*"))
	n := 0
	var errs []error
	for _, e := range engines {
		if hostside.InstanceAlive(filepath.Base(e)) {
			continue
		}
		views, _ := filepath.Glob(filepath.Join(e, "*"))
		for _, v := range views {
			errs = append(errs, removeView(v))
		}
		if err := os.Remove(e); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
