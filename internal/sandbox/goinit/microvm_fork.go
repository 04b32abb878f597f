package goinit

import (
	"fmt"
	"os"
	"syscall"

	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// A session's guest may be copied between jobs (the microVM backend's
// Fork: QEMU saves it and a new QEMU restores the copy). The copy wakes
// with the parent's clock and the kernel's random state of that moment,
// which would make parent and copy draw the same random numbers from then
// on. The engine then sends the copy a VMMessage with the time and a fresh
// seed on the VM port; the agent cannot apply it itself (it has given up
// CAP_SYS_TIME and CAP_SYS_ADMIN, and its seccomp filter is user code's),
// so a helper it started before locking down does: the restore helper,
// in the agent's pid namespace (user code, in the reaper's, cannot name
// it) and outside the guest cgroup of user code.

// microVMRoleRestore is the restore helper's role (argv[1], with
// MicroVMInitPath as argv[0]).
const microVMRoleRestore = "scratchrun-restore"

// The restore helper's descriptors besides /dev/null on 0-2.
const (
	restoreVMFD      = 3 // the VM port, shared with the agent
	restoreReleaseFD = 4 // closed by the agent once the port is the helper's to read
)

// startRestoreHelper starts the restore helper on vm. It reads nothing
// until release is closed: until then, the VM port's messages are the
// agent's (the limits of a session, which come after ready).
func startRestoreHelper(vm *os.File) (release *os.File, err error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	devNull, err := os.Open("/dev/null")
	if err != nil {
		w.Close()
		return nil, err
	}
	defer devNull.Close()
	_, err = syscall.ForkExec("/proc/self/exe", []string{MicroVMInitPath, microVMRoleRestore}, &syscall.ProcAttr{
		Dir:   "/",
		Files: []uintptr{devNull.Fd(), devNull.Fd(), devNull.Fd(), vm.Fd(), r.Fd()},
	})
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("start the restore helper: %w", err)
	}
	return w, nil
}

// runRestoreHelper applies each VMMessage that comes on the VM port once
// it is released (the clock, a seed) and answers with a VMReport, until
// the port closes (the guest ends with the agent).
func runRestoreHelper() int {
	shieldFromSignals()
	release := os.NewFile(restoreReleaseFD, "release")
	var b [1]byte
	_, _ = release.Read(b[:])
	release.Close()
	vm := os.NewFile(restoreVMFD, "vm")
	for {
		var m initproto.VMMessage
		if err := initproto.ReadMessage(vm, initproto.MaxVMMessageBytes, &m); err != nil {
			return 0
		}
		var answer initproto.VMReport
		if err := applyBoot(m); err != nil {
			answer.Error = err.Error()
		}
		if err := initproto.WriteMessage(vm, answer); err != nil {
			return 0
		}
	}
}
