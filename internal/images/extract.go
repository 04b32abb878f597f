package images

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrUnsafeEntry is wrapped by extraction errors for tar entries that would
// land outside the target directory: absolute names, names with "..", and
// names whose parent is a symlink. A real rootfs tarball never has them, so
// they fail the extraction instead of being skipped quietly.
var ErrUnsafeEntry = errors.New("unsafe tar entry")

// idShift says how tar ownership maps to disk ownership.
type idShift struct {
	// chown is false when not running as root: then every file is owned
	// by the caller and ownership in the tar is ignored.
	chown bool
	// base is added to every uid and gid from the tar.
	base uint32
}

// idRange is how many ids a sandbox's user namespace maps; ids outside it
// in a tarball become nobody (65534).
const idRange = 65536

// diskMode is the mode an entry gets on disk. A shifted image is owned by
// ids no host account has, so "other" on the host means every host user:
// a world-writable directory or file in the image (/var/tmp, /run/lock)
// would let any of them plant or change files that every sandbox then sees.
// Inside the sandbox only its root (the image's owner) writes there, which is
// what sandboxes need.
func (s idShift) diskMode(mode uint32) uint32 {
	if s.chown {
		return mode &^ unix.S_IWOTH
	}
	return mode
}

// fileMode is the mode a non-directory gets on disk: diskMode without the
// set-user-ID and set-group-ID bits, whatever the owner. A set-id file in
// the store would hand a host user who can reach it its owner, which is
// the sandboxes' root (their uid on the host) or, unshifted, the engine's
// user; sandboxes need no set-id programs (they run as root inside, and
// the namespaces level mounts the image nosuid anyway). Directories keep
// their set-group-ID bit: it only chooses the group of new files and lets
// no one run anything.
func (s idShift) fileMode(mode uint32) uint32 {
	return s.diskMode(mode) &^ (unix.S_ISUID | unix.S_ISGID)
}

// mapID returns the on-disk id for id n of the tar.
func (s idShift) mapID(n int) int {
	if n < 0 || n >= idRange {
		n = 65534
	}
	return int(s.base) + n
}

// extractStats counts what an extraction did.
type extractStats struct {
	Files, Dirs, Symlinks, Hardlinks int
	// Skipped counts device nodes, fifos and other entries a rootfs
	// must not carry (the sandbox makes its own /dev).
	Skipped int
	// Bytes is the total size of regular files written.
	Bytes int64
}

// pendingDir is a directory whose owner, mode and times are applied after
// all entries are written: a read-only directory mode would stop us from
// creating its children, and creating children changes its mtime.
type pendingDir struct {
	uid, gid int
	mode     uint32
	mtime    time.Time
	atime    time.Time
}

// extractor writes tar entries beneath one root directory fd. Every path is
// opened relative to that fd with openat2 and RESOLVE_BENEATH|
// RESOLVE_NO_SYMLINKS, and final components are created with *at calls
// that never follow a symlink, so no entry can write outside the root,
// whatever symlinks earlier entries created.
type extractor struct {
	root  int
	shift idShift
	stats extractStats
	dirs  map[string]pendingDir
	// skipped holds names of entries not extracted (device nodes),
	// so that hard links to them are skipped too.
	skipped map[string]bool
	buf     []byte
	// A one-entry cache of the last parent directory: tar streams list
	// a directory's files together, so this saves most openat2 walks.
	cachePath string
	cacheFd   int
	// layered is set while image layers are applied: an entry of a later
	// layer then replaces a directory of an earlier one with all its
	// contents, as a container runtime's union would show it.
	layered bool
	// written, when set, is told every path an entry creates (for opaque
	// whiteouts, see layers.go).
	written func(name string)
	// removedDir says the current entry replaced a directory tree, whose
	// pending directories must then be forgotten.
	removedDir bool
	// charge, when set, is told every file content byte written and may
	// fail the write (a pull's bounds, see pullBudget).
	charge func(n int) error
}

// extractTar writes the tar stream r into dest, an existing directory.
// It shifts ownership as described by shift and preserves modes (but for
// the set-id bits of files, see fileMode, and world write, see diskMode)
// and modification times (Python's .pyc files are validated against their
// source's mtime). Device nodes and fifos are skipped, xattrs ignored.
func extractTar(r io.Reader, dest string, shift idShift) (extractStats, error) {
	x, err := newExtractor(dest, shift)
	if err != nil {
		return extractStats{}, err
	}
	defer x.close()
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return x.stats, fmt.Errorf("read tar: %w", err)
		}
		if err := x.entry(hdr, tr); err != nil {
			return x.stats, fmt.Errorf("tar entry %q: %w", hdr.Name, err)
		}
	}
	if err := x.finishDirs(); err != nil {
		return x.stats, err
	}
	return x.stats, nil
}

// newExtractor opens dest, an existing directory, as the root entries are
// written beneath.
func newExtractor(dest string, shift idShift) (*extractor, error) {
	root, err := unix.Open(dest, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dest, err)
	}
	x := &extractor{root: root, shift: shift, dirs: map[string]pendingDir{}, skipped: map[string]bool{}, buf: make([]byte, 1<<20), cacheFd: -1}
	// The root itself belongs to the sandbox's root even when the tarball
	// has no "./" entry (docker export has none).
	now := time.Now()
	x.dirs["."] = pendingDir{shift.mapID(0), shift.mapID(0), 0o755, now, now}
	return x, nil
}

func (x *extractor) close() {
	if x.cacheFd >= 0 {
		unix.Close(x.cacheFd)
		x.cacheFd = -1
	}
	unix.Close(x.root)
}

// cleanName turns a tar entry name into a clean path relative to the root
// ("." for the root itself), refusing anything that could point elsewhere.
func cleanName(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: empty name", ErrUnsafeEntry)
	}
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("%w: absolute name %q", ErrUnsafeEntry, name)
	}
	if strings.IndexByte(name, 0) >= 0 {
		return "", fmt.Errorf("%w: NUL in name", ErrUnsafeEntry)
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", fmt.Errorf("%w: %q contains \"..\"", ErrUnsafeEntry, name)
		}
	}
	return path.Clean(name), nil
}

func (x *extractor) entry(hdr *tar.Header, r io.Reader) error {
	name, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	uid, gid := x.shift.mapID(hdr.Uid), x.shift.mapID(hdr.Gid)
	mode := uint32(hdr.Mode) & 0o7777
	if name == "." {
		if hdr.Typeflag == tar.TypeDir {
			x.dirs["."] = pendingDir{uid, gid, mode, hdr.ModTime, hdr.AccessTime}
			return nil
		}
		return fmt.Errorf("%w: root entry is not a directory", ErrUnsafeEntry)
	}
	switch hdr.Typeflag {
	case tar.TypeDir, tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse, tar.TypeSymlink, tar.TypeLink:
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		// The sandbox provides its own /dev; a rootfs needs no
		// device nodes, and must not smuggle any in.
		x.stats.Skipped++
		x.skipped[name] = true
		return nil
	default:
		// Global headers and other metadata-only or exotic entries.
		return nil
	}
	dir, base := path.Split(name)
	pfd, err := x.parent(path.Clean(dir))
	if err != nil {
		return err
	}
	if x.written != nil {
		x.written(name)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return x.mkdir(pfd, base, name, pendingDir{uid, gid, mode, hdr.ModTime, hdr.AccessTime})
	case tar.TypeSymlink:
		err = x.symlink(pfd, base, hdr.Linkname, uid, gid, hdr.ModTime)
	case tar.TypeLink:
		err = x.hardlink(pfd, base, hdr.Linkname)
	default:
		err = x.file(pfd, base, r, uid, gid, mode, hdr)
	}
	// An (empty) directory may have been replaced: it is no directory
	// to finish any more.
	delete(x.dirs, name)
	if x.removedDir {
		x.forgetBelow(name)
		x.removedDir = false
	}
	return err
}

// forgetBelow drops the pending directories and skipped entries under name,
// after the tree there was removed.
func (x *extractor) forgetBelow(name string) {
	prefix := name + "/"
	for p := range x.dirs {
		if strings.HasPrefix(p, prefix) {
			delete(x.dirs, p)
		}
	}
	for p := range x.skipped {
		if strings.HasPrefix(p, prefix) {
			delete(x.skipped, p)
		}
	}
}

// beneath opens p (relative to root) refusing symlinks and magic links
// anywhere on the way, and refusing to leave the root or cross mounts.
func (x *extractor) beneath(p string, flags uint64) (int, error) {
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
func (x *extractor) parent(dir string) (int, error) {
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

func (x *extractor) dropCache() {
	if x.cacheFd >= 0 {
		unix.Close(x.cacheFd)
	}
	x.cachePath, x.cacheFd = "", -1
}

// mkdirAll creates the missing directories of dir one component at a time,
// each relative to its already opened parent.
func (x *extractor) mkdirAll(dir string) error {
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
		x.dirs[p] = pendingDir{x.shift.mapID(0), x.shift.mapID(0), 0o755, now, now}
		x.stats.Dirs++
	}
	return nil
}

// removeExisting deletes what sits at base so a later entry can replace
// it, as tar does. A non-empty directory is an error, not a recursive
// delete. The parent cache is dropped as the tree changed under it.
func (x *extractor) removeExisting(pfd int, base string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	flags := 0
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		flags = unix.AT_REMOVEDIR
		if x.layered {
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

func (x *extractor) mkdir(pfd int, base, name string, d pendingDir) error {
	err := unix.Mkdirat(pfd, base, 0o700)
	if err == unix.EEXIST {
		var st unix.Stat_t
		if err = unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			if err = x.removeExisting(pfd, base); err != nil {
				return err
			}
			err = unix.Mkdirat(pfd, base, 0o700)
		}
	}
	if err != nil {
		return fmt.Errorf("mkdir: %w", err)
	}
	if _, seen := x.dirs[name]; !seen {
		x.stats.Dirs++
	}
	x.dirs[name] = d
	return nil
}

// create opens base for writing as a new file, replacing whatever was
// there. O_EXCL|O_NOFOLLOW: never opens an existing file or symlink.
func (x *extractor) create(pfd int, base string) (int, error) {
	how := unix.OpenHow{
		Flags:   unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Mode:    0o600,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	fd, err := unix.Openat2(pfd, base, &how)
	if err == unix.EEXIST {
		if err = x.removeExisting(pfd, base); err != nil {
			return -1, err
		}
		fd, err = unix.Openat2(pfd, base, &how)
	}
	return fd, err
}

func (x *extractor) file(pfd int, base string, r io.Reader, uid, gid int, mode uint32, hdr *tar.Header) error {
	fd, err := x.create(pfd, base)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	f := os.NewFile(uintptr(fd), base)
	defer f.Close()
	if x.charge != nil {
		r = budgetReader{r, x.charge}
	}
	n, err := io.CopyBuffer(f, r, x.buf)
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if x.shift.chown {
		if err := unix.Fchown(fd, uid, gid); err != nil {
			return fmt.Errorf("chown: %w", err)
		}
	}
	// After chown, which would clear set-id bits anyway: fileMode never
	// has them.
	if err := unix.Fchmod(fd, x.shift.fileMode(mode)); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	if err := futimens(fd, hdr.AccessTime, hdr.ModTime); err != nil {
		return fmt.Errorf("set times: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	x.stats.Files++
	x.stats.Bytes += n
	return nil
}

func (x *extractor) symlink(pfd int, base, target string, uid, gid int, mtime time.Time) error {
	// The target is stored as is: it is only ever resolved inside the
	// sandbox, never by us.
	err := unix.Symlinkat(target, pfd, base)
	if err == unix.EEXIST {
		if err = x.removeExisting(pfd, base); err != nil {
			return err
		}
		err = unix.Symlinkat(target, pfd, base)
	}
	if err != nil {
		return fmt.Errorf("symlink: %w", err)
	}
	if x.shift.chown {
		if err := unix.Fchownat(pfd, base, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("chown symlink: %w", err)
		}
	}
	if mtime.IsZero() {
		mtime = time.Unix(0, 0)
	}
	ts := []unix.Timespec{unix.NsecToTimespec(mtime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	if err := unix.UtimesNanoAt(pfd, base, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set symlink times: %w", err)
	}
	x.stats.Symlinks++
	return nil
}

func (x *extractor) hardlink(pfd int, base, target string) error {
	tname, err := cleanName(target)
	if err != nil {
		return fmt.Errorf("link target: %w", err)
	}
	if x.skipped[tname] {
		// A hard link to a skipped device node is skipped with it.
		x.stats.Skipped++
		return nil
	}
	if tname == "." {
		return fmt.Errorf("%w: hard link to the root", ErrUnsafeEntry)
	}
	tdir, tbase := path.Split(tname)
	tfd := x.root
	if d := path.Clean(tdir); d != "." {
		if tfd, err = x.beneath(d, unix.O_PATH|unix.O_DIRECTORY); err != nil {
			return fmt.Errorf("open link target's parent: %w", err)
		}
		defer unix.Close(tfd)
	}
	// flags 0: if the target is a symlink, link the symlink itself,
	// never what it points to.
	err = unix.Linkat(tfd, tbase, pfd, base, 0)
	if err == unix.EEXIST {
		if err = x.removeExisting(pfd, base); err != nil {
			return err
		}
		err = unix.Linkat(tfd, tbase, pfd, base, 0)
	}
	if err != nil {
		return fmt.Errorf("hard link to %q: %w", target, err)
	}
	x.stats.Hardlinks++
	return nil
}

// finishDirs applies owner, mode and times to directories, deepest first
// so that setting a parent's mtime comes after its children are final.
func (x *extractor) finishDirs() error {
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
	for _, n := range names {
		d := x.dirs[n]
		fd, err := x.beneath(n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
		if err != nil {
			return fmt.Errorf("finish directory %s: %w", n, err)
		}
		if x.shift.chown {
			err = unix.Fchown(fd, d.uid, d.gid)
		}
		if err == nil {
			err = unix.Fchmod(fd, x.shift.diskMode(d.mode))
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
