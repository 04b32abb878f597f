package layertar

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// beneath opens p (relative to root) refusing symlinks and magic links
// anywhere on the way, and refusing to leave the root or cross mounts.
func (x *Extractor) beneath(p string, flags uint64) (int, error) {
	how := unix.OpenHow{
		Flags:   flags | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	}
	for {
		fd, err := unix.Openat2(x.root, p, &how)
		if err == unix.EINTR || err == unix.EAGAIN {
			// openat2 returns EAGAIN when a concurrent rename
			// races the lookup; retrying is the documented answer.
			continue
		}
		if err == unix.ELOOP || err == unix.EXDEV {
			return -1, fmt.Errorf("%w: %q goes through a symlink or leaves the tree", ErrUnsafeEntry, p)
		}
		return fd, err
	}
}

// parent returns an fd for directory dir (relative to root), creating it
// and its missing ancestors as root-owned 0755 directories: some tarballs
// omit directory entries. The fd belongs to the cache; do not close it.
func (x *Extractor) parent(dir string) (int, error) {
	if dir == "." {
		return x.root, nil
	}
	if dir == x.cachePath {
		return x.cacheFd, nil
	}
	x.dropCache()
	fd, err := x.beneath(dir, unix.O_PATH|unix.O_DIRECTORY)
	if err == unix.ENOENT {
		if err = x.mkdirAll(dir); err == nil {
			fd, err = x.beneath(dir, unix.O_PATH|unix.O_DIRECTORY)
		}
	}
	if err != nil {
		return -1, fmt.Errorf("open parent %s: %w", dir, err)
	}
	x.cachePath, x.cacheFd = dir, fd
	return fd, nil
}

func (x *Extractor) dropCache() {
	if x.cacheFd >= 0 {
		unix.Close(x.cacheFd)
	}
	x.cachePath, x.cacheFd = "", -1
}

// mkdirAll creates the missing directories of dir one component at a time,
// each relative to its already opened parent.
func (x *Extractor) mkdirAll(dir string) error {
	parts := strings.Split(dir, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		fd, err := x.beneath(p, unix.O_PATH|unix.O_DIRECTORY)
		if err == nil {
			unix.Close(fd)
			continue
		}
		if err != unix.ENOENT {
			return err
		}
		pfd := x.root
		if i > 0 {
			if pfd, err = x.beneath(strings.Join(parts[:i], "/"), unix.O_PATH|unix.O_DIRECTORY); err != nil {
				return err
			}
		}
		err = unix.Mkdirat(pfd, parts[i], 0o700)
		if pfd != x.root {
			unix.Close(pfd)
		}
		if err != nil && err != unix.EEXIST {
			return fmt.Errorf("mkdir %s: %w", p, err)
		}
		now := time.Now()
		x.dirs[p] = pendingDir{x.opts.Shift.MapID(0), x.opts.Shift.MapID(0), 0o755, now, now}
		x.stats.Dirs++
	}
	return nil
}

// removeExisting deletes what sits at base so a later entry can replace
// it, as tar does. A non-empty directory is an error, not a recursive
// delete, but for layers (see Options.Layers). The parent cache is dropped
// as the tree changed under it.
func (x *Extractor) removeExisting(pfd int, base string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	flags := 0
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		flags = unix.AT_REMOVEDIR
		if x.opts.Layers {
			// What an earlier layer put in it goes with it.
			if err := removeChildrenAt(pfd, base); err != nil {
				return fmt.Errorf("replace existing %s: %w", base, err)
			}
			x.removedDir = true
		}
	}
	if err := unix.Unlinkat(pfd, base, flags); err != nil {
		return fmt.Errorf("replace existing %s: %w", base, err)
	}
	// Keep pfd valid for the caller: only forget the cached path, the fd
	// is closed on the next parent lookup.
	x.cachePath = ""
	return nil
}

// finishDirs applies owner, mode and times to directories, deepest first
// so that setting a parent's mtime comes after its children are final.
func (x *Extractor) finishDirs() error {
	x.dropCache()
	names := make([]string, 0, len(x.dirs))
	for n := range x.dirs {
		names = append(names, n)
	}
	depth := func(p string) int {
		if p == "." {
			return 0
		}
		return strings.Count(p, "/") + 1
	}
	slices.SortFunc(names, func(a, b string) int { return depth(b) - depth(a) })
	shift := x.opts.Shift
	for _, n := range names {
		d := x.dirs[n]
		fd, err := x.beneath(n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
		if err != nil {
			return fmt.Errorf("finish directory %s: %w", n, err)
		}
		if shift.Chown {
			err = unix.Fchown(fd, d.uid, d.gid)
		}
		if err == nil {
			err = unix.Fchmod(fd, shift.DiskMode(d.mode))
		}
		if err == nil {
			err = futimens(fd, d.atime, d.mtime)
		}
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("finish directory %s: %w", n, err)
		}
	}
	return nil
}

// futimens sets the times of an open file. x/sys/unix has no wrapper for
// utimensat with a NULL path (its Futimes goes through /proc), so this is
// the raw call; a zero atime takes the mtime.
func futimens(fd int, atime, mtime time.Time) error {
	if mtime.IsZero() {
		mtime = time.Unix(0, 0)
	}
	if atime.IsZero() {
		atime = mtime
	}
	ts := [2]unix.Timespec{unix.NsecToTimespec(atime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if errno != 0 {
		return errno
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
