package idmap

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// SandboxBase is the host uid (and gid) of a root engine's sandboxes' root
// on the namespaces and gVisor levels (uid N inside is SandboxBase+N), and
// not the image store's owner (images.DefaultUIDBase..): a process of a
// sandbox that reached the store's directory on the host (an escape from
// its mount namespace, or from gVisor's Sentry to its gofer's uid) must not
// be able to write image files, which every later sandbox of every tenant
// runs. Sandboxes see their image through a View that shows the store's
// uid UIDBase+N as SandboxBase+N, so its files are still root's inside. The
// range lies apart from the images', the namespaces level's user namespace
// owners (1100000000..) and the microVM level's QEMU uids (1200000000..).
const SandboxBase = 1_300_000_000

// ViewsDir, below a backend's state directory, holds one directory per
// engine (its instance name) with the views of the images its sandboxes
// use, made once per image and removed at Close.
const ViewsDir = "images"

// Views are an engine's idmapped, read-only views of images, by image
// directory, each showing the image's files of From+N as SandboxBase+N.
type Views struct {
	dir   string // <state>/images/<instance>
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

// NewViews returns the views of the engine named instance, kept below
// stateDir.
func NewViews(stateDir, instance string) *Views {
	return &Views{dir: filepath.Join(stateDir, ViewsDir, instance), views: map[string]*view{}}
}

// Path returns the view of the image at root, whose files are owned from
// base, making it the first time the image is used.
func (l *Views) Path(root string, base uint32) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(root, &st); err != nil {
		return "", fmt.Errorf("image %s: %w", root, err)
	}
	if inRange(SandboxBase, base) || inRange(base, SandboxBase) {
		return "", fmt.Errorf("image %s: its uids (from %d) overlap the sandboxes' (from %d), which could then write it", root, base, SandboxBase)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if v := l.views[root]; v != nil {
		if v.dev == st.Dev && v.ino == st.Ino && v.base == base {
			return v.path, nil
		}
		// Sandboxes built on the old view keep it in their own mount
		// namespaces (or runsc's); the host's copy only served new ones.
		if err := removeView(v.path); err != nil {
			return "", err
		}
		delete(l.views, root)
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
	// Read-only: sandboxes write through their overlay's upper layer, and
	// a sandbox's uid that reached this mount on the host must not write
	// the image through it. Set-id files (the store strips them anyway)
	// and device nodes do nothing through it.
	tree, err := Tree(root, base, SandboxBase, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		os.Remove(dir)
		return "", fmt.Errorf("show image %s to sandboxes' uids: %w", root, err)
	}
	err = unix.MoveMount(int(tree.Fd()), "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH)
	tree.Close()
	if err != nil {
		os.Remove(dir)
		return "", fmt.Errorf("mount the idmapped view of %s: %w", root, err)
	}
	l.views[root] = &view{path: dir, dev: st.Dev, ino: st.Ino, base: base}
	return dir, nil
}

// Close removes every view and the engine's directory.
func (l *Views) Close() error {
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

// SweepViews removes the views of engines that no longer run (killed
// before Close: alive says which instance names still run, and a live
// engine's are never touched) and counts those engines.
func SweepViews(stateDir string, alive func(instance string) bool) (int, error) {
	engines, _ := filepath.Glob(filepath.Join(stateDir, ViewsDir, "*"))
	n := 0
	var errs []error
	for _, e := range engines {
		if alive(filepath.Base(e)) {
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

// inRange reports whether uid lies among the Size uids from base.
func inRange(uid, base uint32) bool { return uid >= base && uid-base < Size }
