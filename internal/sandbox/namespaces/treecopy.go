package namespaces

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/idmap"
)

// A fork's copy of one writable tree, from a sandbox user code has run in
// (so nothing in the source is trusted) into a fresh one. Every step is
// relative to an open directory and names one entry read from it: no path
// is resolved, and no link is followed (links are copied as links, and
// O_NOFOLLOW refuses one swapped in meanwhile). Only directories, regular
// files and links are copied; devices, fifos and sockets are not (an
// overlay whiteout, a 0/0 character device in the upper layer, removes
// what the image has there instead). Set-id bits of files are dropped.
// What is copied is bounded by the destination's limits, checked before
// each file is written rather than left to a full file system.

// maxCopyDepth bounds how deep a copied tree may be (each level holds two
// descriptors open).
const maxCopyDepth = 256

// errForkTooLarge is a tree that does not fit the new sandbox's limits.
var errForkTooLarge = errors.New("the session's files do not fit the new sandbox's limits")

// treeCopy copies src into dst (open directories it owns).
type treeCopy struct {
	src, dst int
	name     string
	// overlay: src is an overlay upper layer (whiteouts, opaque
	// directories), dst the merged view it is applied to.
	overlay    bool
	bytesLeft  int64
	inodesLeft int64
}

func (c *treeCopy) close() {
	unix.Close(c.src)
	unix.Close(c.dst)
}

func (c *treeCopy) run(ctx context.Context) error {
	if err := c.dir(ctx, c.src, c.dst, c.name, 0); err != nil {
		return fmt.Errorf("copy %s: %w", c.name, err)
	}
	return nil
}

// becomeSandboxRoot gives the calling thread (the copier's, locked to it)
// the sandboxes' root (idmap.SandboxBase) as its file system identity: a
// file created in a sandbox must be owned by a uid its user namespace maps
// (host root is not: creating fails with EOVERFLOW). The capabilities that
// change of identity clears are raised again, so that owners and modes can
// be set as the source has them. An unprivileged engine's uid is its
// sandboxes' root already, and its copier skips this.
func becomeSandboxRoot() error {
	if err := unix.Setfsgid(idmap.SandboxBase); err != nil {
		return fmt.Errorf("setfsgid: %w", err)
	}
	if err := unix.Setfsuid(idmap.SandboxBase); err != nil {
		return fmt.Errorf("setfsuid: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("read capabilities: %w", err)
	}
	data[0].Effective, data[1].Effective = data[0].Permitted, data[1].Permitted
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("raise capabilities: %w", err)
	}
	return nil
}

// dir copies the entries of the open directory src into dst.
func (c *treeCopy) dir(ctx context.Context, src, dst int, path string, depth int) error {
	if depth > maxCopyDepth {
		return fmt.Errorf("%s: deeper than %d directories", path, maxCopyDepth)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	names, err := dirNames(src)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	var srcDev, dstDev unix.Stat_t
	if err := unix.Fstat(src, &srcDev); err != nil {
		return err
	}
	if err := unix.Fstat(dst, &dstDev); err != nil {
		return err
	}
	for _, name := range names {
		if err := c.entry(ctx, src, dst, name, path+"/"+name, depth, srcDev.Dev, dstDev.Dev); err != nil {
			return err
		}
	}
	return nil
}

func (c *treeCopy) entry(ctx context.Context, src, dst int, name, path string, depth int, srcDev, dstDev uint64) error {
	var st unix.Stat_t
	if err := unix.Fstatat(src, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // gone meanwhile
		}
		return fmt.Errorf("stat %s: %w", path, err)
	}
	mode := st.Mode & unix.S_IFMT
	if c.overlay && mode == unix.S_IFCHR && st.Rdev == 0 {
		return c.remove(dst, name, path, dstDev)
	}
	if mode != unix.S_IFDIR && mode != unix.S_IFREG && mode != unix.S_IFLNK {
		return nil // a device, fifo or socket: not copied
	}
	c.inodesLeft--
	if c.inodesLeft < 0 {
		return fmt.Errorf("%w: more files than %s's inode limit", errForkTooLarge, c.name)
	}
	var have unix.Stat_t
	exists := unix.Fstatat(dst, name, &have, unix.AT_SYMLINK_NOFOLLOW) == nil
	if mode == unix.S_IFDIR {
		if exists && have.Mode&unix.S_IFMT == unix.S_IFDIR && have.Dev != dstDev {
			return nil // a mount of the new sandbox's own (/tmp, /proc): copied as a tree of its own, or not at all
		}
		if st.Dev != srcDev {
			return nil
		}
		return c.copyDir(ctx, src, dst, name, path, &st, exists && have.Mode&unix.S_IFMT == unix.S_IFDIR, exists, depth, dstDev)
	}
	if exists {
		if err := c.remove(dst, name, path, dstDev); err != nil {
			return err
		}
	}
	if mode == unix.S_IFLNK {
		return c.copyLink(src, dst, name, path, &st)
	}
	return c.copyFile(src, dst, name, path, &st)
}

func (c *treeCopy) copyDir(ctx context.Context, src, dst int, name, path string, st *unix.Stat_t, isDir, exists bool, depth int, dstDev uint64) error {
	if exists && !isDir {
		if err := c.remove(dst, name, path, dstDev); err != nil {
			return err
		}
	}
	if !isDir {
		if err := unix.Mkdirat(dst, name, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", path, err)
		}
	}
	sfd, err := unix.Openat(src, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(sfd)
	dfd, err := unix.Openat(dst, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s in the new sandbox: %w", path, err)
	}
	defer unix.Close(dfd)
	if isDir && c.overlay && opaque(sfd) {
		// The parent replaced the image's directory: none of what the
		// image has in it shows.
		if err := removeChildren(dfd, path, dstDev); err != nil {
			return err
		}
	}
	if err := c.dir(ctx, sfd, dfd, path, depth+1); err != nil {
		return err
	}
	return setAttrs(dfd, path, st, st.Mode&0o7777)
}

func (c *treeCopy) copyLink(src, dst int, name, path string, st *unix.Stat_t) error {
	target, err := readlinkat(src, name)
	if err != nil {
		return fmt.Errorf("read link %s: %w", path, err)
	}
	if err := unix.Symlinkat(target, dst, name); err != nil {
		return fmt.Errorf("create link %s: %w", path, err)
	}
	if err := unix.Fchownat(dst, name, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("own %s: %w", path, err)
	}
	ts := []unix.Timespec{st.Atim, st.Mtim}
	_ = unix.UtimesNanoAt(dst, name, ts, unix.AT_SYMLINK_NOFOLLOW)
	return nil
}

func (c *treeCopy) copyFile(src, dst int, name, path string, st *unix.Stat_t) error {
	if st.Size > c.bytesLeft {
		return fmt.Errorf("%w: %s would pass %s's size limit", errForkTooLarge, path, c.name)
	}
	in, err := unix.Openat(src, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("open %s: %w", path, err)
	}
	inf := os.NewFile(uintptr(in), path)
	defer inf.Close()
	var now unix.Stat_t
	if err := unix.Fstat(in, &now); err != nil || now.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil // swapped for something else since the stat: not copied
	}
	out, err := unix.Openat(dst, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	outf := os.NewFile(uintptr(out), path)
	defer outf.Close()
	// The file may grow while it is copied: no more than what is left.
	n, err := io.Copy(outf, io.LimitReader(inf, c.bytesLeft+1))
	c.bytesLeft -= n
	if err != nil {
		return fmt.Errorf("copy %s: %w", path, err)
	}
	if c.bytesLeft < 0 {
		return fmt.Errorf("%w: %s passes %s's size limit", errForkTooLarge, path, c.name)
	}
	// Set-id bits are not carried into another sandbox.
	return setAttrs(out, path, st, st.Mode&0o1777)
}

// setAttrs gives the open fd the source's owner, mode and times.
func setAttrs(fd int, path string, st *unix.Stat_t, mode uint32) error {
	if err := unix.Fchown(fd, int(st.Uid), int(st.Gid)); err != nil {
		return fmt.Errorf("own %s: %w", path, err)
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	ts := []unix.Timespec{st.Atim, st.Mtim}
	_ = unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH)
	return nil
}

// remove removes name from dir, a directory with all it holds; a mount of
// the new sandbox's own is left alone.
func (c *treeCopy) remove(dir int, name, path string, dev uint64) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil // nothing there
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if err := unix.Unlinkat(dir, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("remove %s: %w", path, err)
		}
		return nil
	}
	if st.Dev != dev {
		return nil
	}
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	err = removeChildren(fd, path, dev)
	unix.Close(fd)
	if err != nil {
		return err
	}
	if err := unix.Unlinkat(dir, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

// removeChildren empties the open directory fd (of the new sandbox, which
// no user code has run in: its tree is the image's).
func removeChildren(fd int, path string, dev uint64) error {
	names, err := dirNames(fd)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	var c treeCopy
	for _, n := range names {
		if err := c.remove(fd, n, path+"/"+n, dev); err != nil {
			return err
		}
	}
	return nil
}

// opaque reports whether an upper layer's directory hides the lower
// layers' (overlay's opaque mark, trusted or, in a user namespace's
// overlay, user).
func opaque(fd int) bool {
	var b [1]byte
	for _, attr := range []string{"trusted.overlay.opaque", "user.overlay.opaque"} {
		if n, err := unix.Fgetxattr(fd, attr, b[:]); err == nil && n == 1 && b[0] == 'y' {
			return true
		}
	}
	return false
}

func dirNames(fd int) ([]string, error) {
	dup, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), ".")
	defer f.Close()
	return f.Readdirnames(-1)
}

func readlinkat(dir int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dir, name, buf)
	if err != nil {
		return "", err
	}
	if n >= len(buf) {
		return "", unix.ENAMETOOLONG
	}
	return string(buf[:n]), nil
}
