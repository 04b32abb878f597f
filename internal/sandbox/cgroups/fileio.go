package cgroups

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Every sandbox's group is made, limited, read and removed with a few
// dozen small file operations on cgroupfs. They go straight to the kernel:
// os.OpenFile adds an fstat (and the poller's bookkeeping) to each, and
// os.ReadFile an fstat and a second read, for files that are never
// pollable and whose contents fit one buffer.

// write writes value to dir/file in one write(2).
func write(dir, file, value string) error {
	path := filepath.Join(dir, file)
	if err := writeFile(path, value); err != nil {
		return fmt.Errorf("write %s to %s: %w", value, path, err)
	}
	return nil
}

// writeFile writes value to path; errors are *os.PathError around the
// errno, so that errors.Is(err, syscall.EBUSY) still tells a limit below
// usage.
func writeFile(path, value string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	n, err := unix.Write(fd, []byte(value))
	unix.Close(fd)
	if err != nil {
		return &os.PathError{Op: "write", Path: path, Err: err}
	}
	if n != len(value) {
		return &os.PathError{Op: "write", Path: path, Err: unix.EIO}
	}
	return nil
}

// smallFileMax is what readSmall reads at most: cgroup.procs of a sandbox
// (bounded by its pids.max) and the counters files are far smaller; a
// larger file is read whole with os.ReadFile.
const smallFileMax = 16 << 10

// readSmall reads a cgroupfs file: one read into a buffer, and only when
// that fills it the whole file by os.ReadFile.
func readSmall(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	buf := make([]byte, smallFileMax)
	n, err := unix.Read(fd, buf)
	unix.Close(fd)
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	}
	if n == len(buf) {
		return os.ReadFile(path)
	}
	return buf[:n], nil
}
