package idmap

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
)

// Size is how many uids (and gids) a mapping shifts: an image's, from 0.
const Size = 65536

// Tree returns a detached idmapped mount of root (and what is mounted
// below it) in which uid and gid From+N show as To+N (N < Size), with
// attrs (unix.MOUNT_ATTR_*) set as well. Detached, it is nowhere in the
// mount table and goes away with its last descriptor unless attached
// (unix.MoveMount).
func Tree(root string, from, to uint32, attrs uint64) (*os.File, error) {
	userns, err := Namespace(from, to)
	if err != nil {
		return nil, err
	}
	defer userns.Close()
	fd, err := unix.OpenTree(unix.AT_FDCWD, root, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return nil, fmt.Errorf("open_tree %s: %w", root, err)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | attrs, Userns_fd: uint64(userns.Fd())}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("idmap %s (its file system must support idmapped mounts): %w", root, err)
	}
	return os.NewFile(uintptr(fd), root), nil
}

// Namespace returns a user namespace in which uid and gid from+N are host
// uid and gid to+N (N < Size): as the idmapping of a mount it shows files
// of from+N as to+N. A namespace needs a process to be made: cat holds it,
// waiting on a pipe, until the descriptor is open.
func Namespace(from, to uint32) (*os.File, error) {
	cat, err := exec.LookPath("cat")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(cat)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	m := []syscall.SysProcIDMap{{ContainerID: int(from), HostID: int(to), Size: Size}}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, UidMappings: m, GidMappings: m, Pdeathsig: syscall.SIGKILL}
	// From the starter's thread (hostside.StartChild), as every child with
	// a parent-death signal: a retired thread would kill it early.
	if err := hostside.StartChild(cmd); err != nil {
		stdin.Close()
		return nil, fmt.Errorf("make an idmapping namespace: %w", err)
	}
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid))
	stdin.Close()
	waitErr := cmd.Wait()
	if err != nil {
		return nil, fmt.Errorf("make an idmapping namespace: %w", err)
	}
	if waitErr != nil {
		ns.Close()
		return nil, errors.Join(errors.New("idmapping namespace holder failed"), waitErr)
	}
	return ns, nil
}
