package goinit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Entries of /proc/1 Linux lets only the init's owner (or a tracer) read
// or write, under the reaper's /proc: directories and files others may not
// read are hidden (an empty read-only tmpfs, /dev/null), files others may
// read but not write are made read-only.
var (
	guardedInitDirs  = []string{"fd", "fdinfo", "ns", "task", "map_files", "attr"}
	guardedInitFiles = []string{
		"auxv", "environ", "io", "mem", "maps", "smaps", "smaps_rollup", "pagemap", "stack", "syscall",
		"personality", "wchan", "sched", "clear_refs",
	}
	frozenInitFiles = []string{
		"comm", "coredump_filter", "oom_adj", "oom_score_adj", "uid_map", "gid_map", "setgroups",
		"children", "timerslack_ns", "loginuid", "sessionid",
	}
)

// hideInitProc hides /proc/1's guarded entries and every /proc/N of the
// reaper's other threads (2..last) in the /proc under root.
func hideInitProc(root string, last int) error {
	const (
		hideDir = iota
		hideFile
		freeze
	)
	apply := func(target string, how int) error {
		switch how {
		case hideDir:
			return mount("tmpfs", target, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,nr_inodes=4")
		case hideFile:
			return mount("/dev/null", target, "", unix.MS_BIND, "")
		}
		// A regular file (not /dev/null, which a read-only mount leaves
		// writable): writes fail.
		if err := mount(target, target, "", unix.MS_BIND, ""); err != nil {
			return err
		}
		return mount("", target, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	}
	proc := filepath.Join(root, "proc")
	for _, group := range []struct {
		names []string
		how   int
	}{{guardedInitDirs, hideDir}, {guardedInitFiles, hideFile}, {frozenInitFiles, freeze}} {
		for _, name := range group.names {
			target := filepath.Join(proc, "1", name)
			fi, err := os.Lstat(target)
			if errors.Is(err, os.ErrNotExist) {
				continue
			} else if err != nil {
				return fmt.Errorf("hide %s: %w", target, err)
			}
			if fi.IsDir() != (group.how == hideDir) {
				continue
			}
			if err := apply(target, group.how); err != nil {
				return err
			}
		}
	}
	for tid := 2; tid <= last; tid++ {
		target := filepath.Join(proc, strconv.Itoa(tid))
		if _, err := os.Stat(target); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := apply(target, hideDir); err != nil {
			return err
		}
	}
	return nil
}
