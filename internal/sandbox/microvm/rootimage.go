package microvm

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/idmap"
)

// A runtime image is a host directory whose files the image store owns
// from UIDBase up (uid N of the image is UIDBase+N on disk). A guest gets
// it as a read-only block device holding an EROFS image of the same tree,
// built once per image and kept in the cache directory. The guest must see
// the image's own owners (root as 0), and mkfs.erofs 1.5 cannot shift
// owners, so it reads the tree through an idmapped mount that maps
// UIDBase+N back to N: no copy, and the image's directory is never
// written.

// rootImages builds and finds EROFS images of runtime images.
type rootImages struct {
	dir      string // the cache directory of images
	mkfs     string // mkfs.erofs
	mountDir string // where the shifted trees are mounted while mkfs.erofs reads them
	mu       sync.Mutex
	builds   map[string]*sync.Mutex // one build at a time per image, in this process
	// fixed are images built elsewhere (the probe's, in the state
	// directory), by root directory.
	fixed map[string]string
}

// imageKey names an image's EROFS file: a hash of what identifies the
// tree (its path, its owner base, its build record and the directory's
// change time), so that a rebuilt image gets a new file.
func imageKey(img sandbox.Image) (string, error) {
	root, err := filepath.EvalSymlinks(img.RootFS)
	if err != nil {
		return "", fmt.Errorf("image %s: %w", img.RootFS, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(root, &st); err != nil {
		return "", fmt.Errorf("image %s: %w", img.RootFS, err)
	}
	h := sha256.New()
	fmt.Fprintln(h, root, img.UIDBase, st.Ino, st.Ctim.Nano())
	if record, err := os.ReadFile(filepath.Join(filepath.Dir(root), "image.json")); err == nil {
		h.Write(record)
	}
	return hex.EncodeToString(h.Sum(nil))[:24], nil
}

// path returns img's EROFS file, building it first if needed.
func (r *rootImages) path(img sandbox.Image) (string, error) {
	r.mu.Lock()
	fixed, ok := r.fixed[img.RootFS]
	r.mu.Unlock()
	if ok {
		return fixed, nil
	}
	key, err := imageKey(img)
	if err != nil {
		return "", err
	}
	path := filepath.Join(r.dir, key+".erofs")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	r.mu.Lock()
	if r.builds == nil {
		r.builds = map[string]*sync.Mutex{}
	}
	one := r.builds[key]
	if one == nil {
		one = &sync.Mutex{}
		r.builds[key] = one
	}
	r.mu.Unlock()
	one.Lock()
	defer one.Unlock()
	// Another engine may be building it: its lock file says so.
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", fmt.Errorf("image %s: %w", img.RootFS, err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", err
	}
	defer os.Remove(lock.Name())
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := r.build(img, path); err != nil {
		return "", fmt.Errorf("make a block image of %s: %w", img.RootFS, err)
	}
	return path, nil
}

// buildFixed builds img's EROFS image at path, to be used for img from
// now on, in place of the cache.
func (r *rootImages) buildFixed(img sandbox.Image, path string) error {
	if err := r.build(img, path); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fixed == nil {
		r.fixed = map[string]string{}
	}
	r.fixed[img.RootFS] = path
	return nil
}

// build writes the EROFS image of img to path.
func (r *rootImages) build(img sandbox.Image, path string) error {
	source := img.RootFS
	if img.UIDBase != 0 {
		tree, err := shiftedTree(img)
		if err != nil {
			return err
		}
		// mkfs.erofs resolves its source to a path (a descriptor's
		// /proc/self/fd link would name the host's root): the shifted
		// tree is mounted for the build's duration in a directory of the
		// backend's, and a crashed engine's is removed by the next
		// (sweepBuildMounts).
		dir, err := os.MkdirTemp(r.mountDir, buildMountPrefix)
		if err != nil {
			tree.Close()
			return err
		}
		err = unix.MoveMount(int(tree.Fd()), "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH)
		tree.Close()
		if err != nil {
			os.Remove(dir)
			return fmt.Errorf("mount the shifted tree: %w", err)
		}
		defer removeBuildMount(dir)
		source = dir
	}
	tmp := path + ".tmp"
	defer os.Remove(tmp)
	cmd := exec.Command(r.mkfs, "--quiet", tmp, source)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", r.mkfs, err, out)
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// shiftedTree returns a detached, read-only, idmapped mount of img's
// tree in which its files are owned from 0 up. Detached, it is nowhere in
// the mount table and goes away with its last descriptor.
func shiftedTree(img sandbox.Image) (*os.File, error) {
	// Shifted, the image's root files are host root's: while mounted for
	// mkfs.erofs, a set-id file there (one the store did not strip) must
	// not make a host user root, nor a device node reach a device.
	return idmap.Tree(img.RootFS, img.UIDBase, 0,
		unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
}

// buildMountPrefix names the directories shifted trees are mounted on.
const buildMountPrefix = "mkfs-"

// removeBuildMount unmounts and removes a shifted tree's directory.
func removeBuildMount(dir string) error {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return os.Remove(dir)
}

// sweepBuildMounts removes the shifted-tree mounts of builds that did not
// finish (an engine killed in the middle; a live engine's build holds the
// image's lock file, so none is touched while it runs... and the mount
// directory is per state directory: one engine's).
func sweepBuildMounts(dir string) error {
	entries, _ := filepath.Glob(filepath.Join(dir, buildMountPrefix+"*"))
	var errs []error
	for _, e := range entries {
		errs = append(errs, removeBuildMount(e))
	}
	return errors.Join(errs...)
}
