package layertar

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Options say how tar streams are written.
type Options struct {
	// Shift maps the tar's ownership and modes to the disk's.
	Shift Shift
	// Layers applies the streams as OCI image layers: whiteouts delete
	// what the layers below left, and an entry replacing a directory
	// takes its whole tree, as a container runtime's union would show it.
	// Without it every entry, ".wh." names too, is a file of the tree.
	Layers bool
	// Charge, when set, is told every file content byte written and may
	// fail the write (a pull's bounds).
	Charge func(n int) error
}

// Stats count what an extraction did.
type Stats struct {
	Files, Dirs, Symlinks, Hardlinks int
	// Skipped counts device nodes, fifos and other entries a rootfs
	// must not carry (the sandbox makes its own /dev).
	Skipped int
	// Bytes is the total size of regular files written (in layers, files
	// later layers replaced count too).
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

// Extractor writes tar entries beneath one root directory fd. Every path is
// opened relative to that fd with openat2 and RESOLVE_BENEATH|
// RESOLVE_NO_SYMLINKS, and final components are created with *at calls
// that never follow a symlink, so no entry can write outside the root,
// whatever symlinks earlier entries created. It is not safe for concurrent
// use.
type Extractor struct {
	root  int
	opts  Options
	stats Stats
	dirs  map[string]pendingDir
	// skipped holds names of entries not extracted (device nodes),
	// so that hard links to them are skipped too.
	skipped map[string]bool
	buf     []byte
	// A one-entry cache of the last parent directory: tar streams list
	// a directory's files together, so this saves most openat2 walks.
	cachePath string
	cacheFd   int
	// touched holds, with Options.Layers, every path the current layer
	// created, with its ancestors: an opaque whiteout keeps exactly those.
	touched map[string]bool
	// removedDir says the current entry replaced a directory tree, whose
	// pending directories must then be forgotten.
	removedDir bool
}

// New opens dest, an existing directory, as the root entries are written
// beneath. The caller applies one or more streams (Apply) and then calls
// Finish, or Close after an error.
func New(dest string, opts Options) (*Extractor, error) {
	root, err := unix.Open(dest, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dest, err)
	}
	x := &Extractor{root: root, opts: opts, dirs: map[string]pendingDir{}, skipped: map[string]bool{}, buf: make([]byte, 1<<20), cacheFd: -1}
	// The root itself belongs to the sandbox's root even when the tarball
	// has no "./" entry (docker export has none).
	now := time.Now()
	x.dirs["."] = pendingDir{opts.Shift.MapID(0), opts.Shift.MapID(0), 0o755, now, now}
	return x, nil
}

// Apply writes the (uncompressed) tar stream r on top of what the streams
// before it wrote. It preserves modes (but for the set-id bits of files,
// see Shift.FileMode, and world write, see Shift.DiskMode) and modification
// times (Python's .pyc files are validated against their source's mtime).
// Device nodes and fifos are skipped, xattrs ignored. It reads r up to the
// tar's end-of-archive marker, not beyond.
func (x *Extractor) Apply(r io.Reader) error {
	x.touched = map[string]bool{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read tar: %w", err)
		}
		if err := x.layerEntry(hdr, tr); err != nil {
			return fmt.Errorf("tar entry %q: %w", hdr.Name, err)
		}
	}
}

// Finish applies the directories' owners, modes and times, deepest first,
// and closes the tree; it reports what was extracted.
func (x *Extractor) Finish() (Stats, error) {
	defer x.Close()
	err := x.finishDirs()
	return x.stats, err
}

// Close releases the tree without finishing it (after an error). It may be
// called more than once, and after Finish.
func (x *Extractor) Close() {
	x.dropCache()
	if x.root >= 0 {
		unix.Close(x.root)
		x.root = -1
	}
}

func (x *Extractor) entry(hdr *tar.Header, r io.Reader) error {
	name, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	shift := x.opts.Shift
	uid, gid := shift.MapID(hdr.Uid), shift.MapID(hdr.Gid)
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
	if x.opts.Layers {
		x.touch(name)
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
func (x *Extractor) forgetBelow(name string) {
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

func (x *Extractor) mkdir(pfd int, base, name string, d pendingDir) error {
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
func (x *Extractor) create(pfd int, base string) (int, error) {
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

func (x *Extractor) file(pfd int, base string, r io.Reader, uid, gid int, mode uint32, hdr *tar.Header) error {
	fd, err := x.create(pfd, base)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	f := os.NewFile(uintptr(fd), base)
	defer f.Close()
	if x.opts.Charge != nil {
		r = chargeReader{r, x.opts.Charge}
	}
	n, err := io.CopyBuffer(f, r, x.buf)
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if x.opts.Shift.Chown {
		if err := unix.Fchown(fd, uid, gid); err != nil {
			return fmt.Errorf("chown: %w", err)
		}
	}
	// After chown, which would clear set-id bits anyway: FileMode never
	// has them.
	if err := unix.Fchmod(fd, x.opts.Shift.FileMode(mode)); err != nil {
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

func (x *Extractor) symlink(pfd int, base, target string, uid, gid int, mtime time.Time) error {
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
	if x.opts.Shift.Chown {
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

func (x *Extractor) hardlink(pfd int, base, target string) error {
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

// chargeReader tells charge what is read through it, and fails the read
// charge refuses.
type chargeReader struct {
	r      io.Reader
	charge func(int) error
}

func (c chargeReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		if cerr := c.charge(n); cerr != nil {
			return n, cerr
		}
	}
	return n, err
}
