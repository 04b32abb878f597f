package microvm

import (
	"io"
	"os"
	"syscall"
)

// VMM starts virtual machines for the backend. QEMU is the one built in
// (QEMUVMM); Cloud Hypervisor or Firecracker, where a host has them, would
// be another implementation of these few methods: the backend needs a
// machine booted from a kernel and initramfs, with one read-only drive,
// named serial ports, an optional tap, and a way to save and restore one.
type VMM interface {
	// Name says which VMM this is, for messages ("qemu").
	Name() string
	// Start starts spec's machine with its CPUs stopped and returns it;
	// join, when set, is called with the VMM process's pid before the
	// guest runs a single instruction (the backend puts it in the
	// sandbox's cgroup there), and the machine then runs.
	Start(spec MachineSpec, join func(pid int) error) (VM, error)
}

// VM is one running machine of a VMM.
type VM interface {
	// Pid is the VMM process's pid.
	Pid() int
	// Done is closed once the VMM process has exited and been reaped.
	Done() <-chan struct{}
	// Kill ends the VMM process at once (it is reaped in the background;
	// wait for Done).
	Kill()
	// Save stops the machine and writes its whole state to f, which a
	// later Start with MachineSpec.Incoming restores; the machine stays
	// stopped (the caller kills it).
	Save(f *os.File) error
	// Resume runs a machine Save stopped.
	Resume() error
}

// MachineSpec is one machine as the backend wants it.
type MachineSpec struct {
	// Accel is "kvm" or "tcg" (software emulation).
	Accel string
	// Kernel, Initrd and Cmdline boot the guest.
	Kernel, Initrd, Cmdline string
	// MemoryMB is the guest's RAM and CPUs its virtual CPUs.
	MemoryMB int64
	CPUs     int
	// Drive is the image's read-only block device.
	Drive string
	// Ports are the guest's virtio-serial ports, each backed by the VMM's
	// end of a connected socket: the guest reads what the engine writes to
	// the other end, and the other way round.
	Ports []Port
	// Console receives the guest's serial console (kernel messages).
	Console *os.File
	// Tap, when set, is an open tap device: the guest's network interface,
	// with address MAC.
	Tap *os.File
	MAC string
	// Incoming, when set, is a saved state (VM.Save) to restore instead of
	// booting: every other field must be as when it was saved, except the
	// files, which are new.
	Incoming *os.File
	// Credential is who the VMM process runs as.
	Credential *syscall.Credential
	// Stderr receives the VMM's own messages.
	Stderr io.Writer
}

// Port is one named virtio-serial port.
type Port struct {
	Name string
	File *os.File
}
