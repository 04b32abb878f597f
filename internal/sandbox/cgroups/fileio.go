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
	fd, err := openRetrying(path, unix.O_WRONLY|unix.O_CLOEXEC)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	// A write to a v1 memory limit below usage reclaims first, and a
	// signal (the engine's children exit all the time) interrupts it with
	// EINTR: os.WriteFile retried it, and so does this.
	var n int
	for {
		n, err = unix.Write(fd, []byte(value))
		if err != unix.EINTR {
			break
		}
	}
	unix.Close(fd)
	if err != nil {
		return &os.PathError{Op: "write", Path: path, Err: err}
	}
	if n != len(value) {
		return &os.PathError{Op: "write", Path: path, Err: unix.EIO}
	}
	return nil
}

// smallFileMax is readSmall's first buffer: the counters files, and
// cgroup.procs of most sandboxes, fit it; a larger file grows it.
const smallFileMax = 1 << 10

// readSmall reads a cgroupfs file whole: reads until one returns nothing,
// since cgroupfs files are seq_files, whose reads end at a page of records
// however large the buffer (cgroup.procs of more than about 500 processes
// comes in several).
func readSmall(path string) ([]byte, error) {
	fd, err := openRetrying(path, unix.O_RDONLY|unix.O_CLOEXEC)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, smallFileMax)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// openRetrying is open(2), retried when a signal interrupts it.
func openRetrying(path string, flags int) (int, error) {
	for {
		fd, err := unix.Open(path, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}
