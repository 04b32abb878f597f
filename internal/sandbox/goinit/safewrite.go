package goinit

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// safeWrite writes a file after user code may have run (a session's job
// files and file writes; see the C init's safe_write, whose rules these
// are): the parent is resolved within root, one component at a time (a
// symbolic link is followed only inside the sandbox's tree, never through
// /proc's magic links), missing parents made below the part already
// resolved; the parent must not be a kernel pseudo-file system, and the
// file itself must be a regular file or new: a link, fifo or device in its
// place is refused, not followed or opened.
func safeWrite(rootFD int, path string, data []byte) error {
	if !strings.HasPrefix(path, "/") || path == "/" || strings.HasSuffix(path, "/") {
		return fmt.Errorf("files[%q]: not an absolute file path", path)
	}
	cut := strings.LastIndexByte(path, '/')
	parent, base := path[:cut], path[cut+1:]
	dir, err := openDirInRoot(rootFD, "/")
	if err != nil {
		return fmt.Errorf("files[%q]: open parent directory: %w", path, err)
	}
	// Each prefix resolved anew from the root, so that a link among its
	// components resolves as the sandbox sees it.
	for i := 1; i <= len(parent); i++ {
		if i < len(parent) && parent[i] != '/' {
			continue
		}
		prefix, name := parent[:i], parent[strings.LastIndexByte(parent[:i], '/')+1:i]
		if name == "" {
			continue
		}
		next, err := openDirInRoot(rootFD, prefix)
		if errors.Is(err, unix.ENOENT) {
			if err := unix.Mkdirat(dir, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(dir)
				return fmt.Errorf("files[%q]: create parent directory %s: %w", path, prefix, err)
			}
			next, err = openDirInRoot(rootFD, prefix)
		}
		unix.Close(dir)
		if err != nil {
			return fmt.Errorf("files[%q]: open parent directory: %w", path, err)
		}
		dir = next
	}
	defer unix.Close(dir)
	if fstypeRefused(dir) {
		return fmt.Errorf("files[%q]: the parent directory is a kernel pseudo-file system", path)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dir, base, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("files[%q]: it exists and is not a regular file", path)
	}
	fd, err := unix.Openat(dir, base, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("files[%q]: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	// Swapped in since the fstatat: refuse before writing.
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("files[%q]: not a regular file", path)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("files[%q]: %w", path, err)
	}
	return nil
}

// openDirInRoot opens path, resolved within root, as a directory handle.
func openDirInRoot(rootFD int, path string) (int, error) {
	return unix.Openat2(rootFD, path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// mqueueMagic is the message queue file system's magic (not in x/sys).
const mqueueMagic = 0x19800202

// fstypeRefused reports whether fd lies on a kernel pseudo-file system
// that init must neither read nor write for a job.
func fstypeRefused(fd int) bool {
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil {
		return true
	}
	switch fs.Type {
	case unix.PROC_SUPER_MAGIC, unix.SYSFS_MAGIC, unix.DEVPTS_SUPER_MAGIC, mqueueMagic:
		return true
	}
	return false
}
