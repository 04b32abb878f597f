package goinit

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// A microVM sandbox's guest runs this package as its pid 1, from the
// initramfs the microvm backend builds: the kernel starts /init with
// MicroVMRole after "--" on its command line. The agent is the gVisor init
// with a boot in front of it: it loads the guest's drivers, finds its
// virtio-serial ports (where the other inits have pipes), builds the
// sandbox's root from the image's read-only drive under a RAM overlay,
// puts user code's reaper in a guest cgroup that holds the request's
// limits, and then serves the same protocol, with the reaper, the
// lock-down, the timeout and the return files of gvisor.go and reaper.go.

// Where the kernel starts the agent, and the role it names after "--".
const (
	MicroVMInitPath = "/init"
	MicroVMRole     = "scratchrun-microvm"
)

// The guest's virtio-serial port names: the host side opens one socket per
// port, named alike. PortStdout and PortStderr are the program's output,
// written by user code straight into the port (no copy through init).
const (
	PortControl = "control"
	PortStatus  = "status"
	PortStdout  = "stdout"
	PortStderr  = "stderr"
	PortVM      = "vm"
)

// MicroVMPorts are every port the agent opens, in the order the host adds
// them.
var MicroVMPorts = []string{PortControl, PortStatus, PortStdout, PortStderr, PortVM}

// MicroVMModulesDir is the initramfs directory of kernel modules; its file
// MicroVMModulesOrder lists them, one file name a line, in load order.
const (
	MicroVMModulesDir   = "/modules"
	MicroVMModulesOrder = "order"
)

// The guest's read-only root drive and the interface egress gets.
const (
	microVMRootDevice = "/dev/vda"
	microVMNetDevice  = "eth0"
)

// bootWait bounds the wait for the guest's devices to appear after their
// drivers load (slow under software emulation, but never this slow).
const bootWait = 60 * time.Second

// inGuest is set when the process is a microVM's agent: there, the kernel
// waits for a pid namespace's processes before its init's end is reported,
// and /proc lists kernel threads too, so the reaper's end needs no polling.
var inGuest bool

// runMicroVMAgent is pid 1 of a microVM guest. Returning ends the guest:
// the kernel panics at init's end and, with panic=-1 and QEMU's
// -no-reboot, the VM is gone at once; that is how a sandbox ends.
func runMicroVMAgent() int {
	inGuest = true
	runtime.LockOSThread()
	shieldFromSignals()
	ports, err := bootGuest()
	if err != nil {
		// Nothing to report on: the host sees the VM end without a word
		// and shows the guest's console.
		fmt.Fprintf(os.Stderr, "scratchrun guest agent: %v\n", err)
		return 1
	}
	vm := ports[PortVM]
	if err := initproto.WriteMessage(vm, initproto.VMReport{}); err != nil {
		return 1
	}
	// A guest restored from a snapshot continues here, on new host
	// sockets, with the clock and randomness of the snapshot's moment.
	var boot initproto.VMMessage
	if err := initproto.ReadMessage(vm, initproto.MaxVMMessageBytes, &boot); err != nil {
		return 1
	}
	if err := applyBoot(boot); err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun guest agent: %v\n", err)
		return 1
	}
	control, status := ports[PortControl], ports[PortStatus]
	setup, ok := readSetup(control, status)
	if !ok {
		return 1
	}
	r, group, release, err := prepareMicroVM(setup, boot, vm)
	if !reportReady(status, err) {
		return 1
	}
	var limits initproto.VMMessage
	if err := initproto.ReadMessage(vm, initproto.MaxVMMessageBytes, &limits); err != nil {
		r.end() // destroyed unused
		return 0
	}
	var answer initproto.VMReport
	if err := group.setJobLimits(limits); err != nil {
		answer.Error = err.Error()
	}
	if err := initproto.WriteMessage(vm, answer); err != nil || answer.Error != "" {
		r.end()
		return 0
	}
	if setup.Session {
		// The limits above are the session's; each job's end reports
		// what they did during it, before its result. The VM port's
		// messages are the restore helper's from now on.
		release.Close()
		r.serveSession(control, status, func() {
			_ = initproto.WriteMessage(vm, group.report())
			group.resetCounts()
		})
		return 0
	}
	var job initproto.JobMessage
	if err := initproto.ReadMessage(control, initproto.MaxJobBytes, &job); err != nil {
		r.end()
		return 0
	}
	res := r.runJob(job)
	_ = initproto.WriteMessage(vm, group.report())
	_ = initproto.WriteMessage(status, res)
	return 0
}

// bootGuest mounts the kernel's file systems, loads the drivers the
// initramfs carries and opens the host's ports; the program's stdout and
// stderr ports become fds 1 and 2, which the reaper hands on.
func bootGuest() (map[string]*os.File, error) {
	for _, m := range []struct{ src, dir, fstype string }{
		{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"devtmpfs", "/dev", "devtmpfs"},
	} {
		if err := os.MkdirAll(m.dir, 0o755); err != nil {
			return nil, err
		}
		if err := mount(m.src, m.dir, m.fstype, unix.MS_NOSUID|unix.MS_NOEXEC, ""); err != nil {
			return nil, err
		}
	}
	if err := loadModules(MicroVMModulesDir); err != nil {
		return nil, err
	}
	ports, err := openPorts(MicroVMPorts, bootWait)
	if err != nil {
		return nil, err
	}
	if err := unix.Dup3(int(ports[PortStdout].Fd()), 1, 0); err != nil {
		return nil, fmt.Errorf("stdout port: %w", err)
	}
	if err := unix.Dup3(int(ports[PortStderr].Fd()), 2, 0); err != nil {
		return nil, fmt.Errorf("stderr port: %w", err)
	}
	return ports, nil
}

// applyBoot sets the guest's clock and reseeds its random pool from the
// host's, before anything of the sandbox reads either.
func applyBoot(m initproto.VMMessage) error {
	if !m.Now.IsZero() {
		tv := unix.NsecToTimeval(m.Now.UnixNano())
		if err := unix.Settimeofday(&tv); err != nil {
			return fmt.Errorf("set the clock: %w", err)
		}
	}
	if len(m.Seed) > 0 {
		if err := reseed(m.Seed); err != nil {
			return err
		}
	}
	return nil
}

// prepareMicroVM builds the sandbox's root and cgroup, moves init into
// the root, and then does what the gVisor init does: scratch file systems,
// the reaper (in the cgroup), lock-down.
//
// A session's guest also gets the restore helper (microvm_fork.go), which
// needs the privileges the agent then gives up; release starts it.
func prepareMicroVM(setup initproto.SetupMessage, boot initproto.VMMessage, vm *os.File) (r *reaper, group *guestGroup, release *os.File, err error) {
	if len(setup.UserNamespaceLimits) > 0 || len(setup.Rlimits) > 0 {
		// The guest kernel counts those objects for the guest alone.
		return nil, nil, nil, errors.New("setup asks for kernel limits the microVM agent does not apply")
	}
	if group, err = newGuestGroup(boot); err != nil {
		return nil, nil, nil, err
	}
	if err := buildGuestRoot(microVMRootDevice, setup.WritableBytes); err != nil {
		return nil, nil, nil, err
	}
	if err := configureNetwork(boot, microVMNetDevice); err != nil {
		return nil, nil, nil, err
	}
	if err := unix.Sethostname([]byte(setup.Hostname)); err != nil {
		return nil, nil, nil, fmt.Errorf("set the host name: %w", err)
	}
	if err := mountScratch(setup); err != nil {
		return nil, nil, nil, err
	}
	if setup.Session {
		if release, err = startRestoreHelper(vm); err != nil {
			return nil, nil, nil, err
		}
	}
	if r, err = startReaperIn(setup, group.join); err != nil {
		return nil, nil, nil, err
	}
	if err := lockDownGVisor(setup); err != nil {
		r.end()
		return nil, nil, nil, err
	}
	return r, group, release, nil
}
