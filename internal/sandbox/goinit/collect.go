package goinit

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// collectFiles reads the return files after every user process is dead.
//
// Each path resolves with RESOLVE_IN_ROOT against the sandbox's root, so a
// symlink (absolute or full of "..") can never leave the sandbox's tree, and
// with RESOLVE_NO_MAGICLINKS, so /proc/<pid>/fd and /proc/<pid>/root jumps are
// refused. Only regular files outside /proc, /sys, devpts and mqueue are returned; a file
// larger than what is left of the byte budget is skipped whole (a cut binary
// file is worse than none), with a note.
func collectFiles(paths []string, budget int64) (map[string][]byte, []string) {
	files := map[string][]byte{}
	var notes []string
	root, err := os.Open("/")
	if err != nil {
		return files, []string{fmt.Sprintf("Return files could not be read: %v.", err)}
	}
	defer root.Close()
	for _, p := range paths {
		data, err := readInRoot(int(root.Fd()), p, budget)
		if err != nil {
			notes = append(notes, fmt.Sprintf("Return file %s was not returned: %v.", p, err))
			continue
		}
		budget -= int64(len(data))
		files[p] = data
	}
	return files, notes
}

// readInRoot reads path, resolved within rootFD, as a return file is read
// (see collectFiles), at most budget bytes.
func readInRoot(rootFD int, path string, budget int64) ([]byte, error) {
	fd, err := unix.Openat2(rootFD, path, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOCTTY,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, errors.New("it does not exist")
		}
		return nil, err
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, errors.New("it is not a regular file")
	}
	if fstypeRefused(fd) {
		return nil, errors.New("it is a kernel pseudo-file")
	}
	if st.Size > budget {
		return nil, fmt.Errorf("it is %d bytes, more than the %d bytes left for return files", st.Size, budget)
	}
	data, err := io.ReadAll(io.LimitReader(f, budget+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > budget {
		return nil, fmt.Errorf("it grew past the %d bytes left for return files", budget)
	}
	return data, nil
}
