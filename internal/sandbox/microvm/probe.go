package microvm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/goinit"
	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
)

// Probe time limits. A KVM that cannot run an ordinary kernel (nested
// virtualisation of some kinds) hangs the guest rather than failing, so
// its probe is bounded well below a software boot's limit.
const (
	kvmProbeTimeout = 20 * time.Second
	tcgProbeTimeout = 3 * time.Minute
)

// kvmCreateVM is the KVM_CREATE_VM ioctl (_IO(KVMIO, 0x01)).
const kvmCreateVM = 0xAE01

// chooseAccel boots one machine to its agent and runs the probe job in
// it, on KVM when the device can create a VM and the probe passes there,
// else under software emulation, which it then says everywhere. The
// verdict is kept for this boot of the host (in ProbeCacheDir), so that
// later engines skip a KVM that hangs.
func (b *Backend) chooseAccel() error {
	if b.opts.Accel != "" {
		if b.opts.Accel == AccelKVM {
			b.kvmAccess()
		}
		if err := b.probe(b.opts.Accel); err != nil {
			return fmt.Errorf("microVM sandboxes cannot run here with %s: %w", b.opts.Accel, err)
		}
		b.useAccel(b.opts.Accel, "")
		return nil
	}
	marker := b.probeMarker()
	if lines, ok := b.probeCache().Read(marker); ok {
		why := strings.Join(lines[1:], " ")
		if accel := lines[0]; accel == AccelKVM || accel == AccelTCG {
			b.useAccel(accel, why)
			return nil
		}
	}
	why := ""
	if err := kvmUsable(b.opts.KVMDevice); err != nil {
		why = err.Error()
	} else if err := b.probeKVM(); err != nil {
		why = "KVM cannot boot a guest here: " + hostside.FirstLine(err.Error())
	} else {
		b.useAccel(AccelKVM, "")
		b.remember(marker, AccelKVM, "")
		return nil
	}
	if err := b.probe(AccelTCG); err != nil {
		return fmt.Errorf("microVM sandboxes cannot run here (QEMU %s, kernel %s): %w", b.vmm.(*QEMUVMM).Binary, b.kernel.Image, err)
	}
	b.useAccel(AccelTCG, why)
	b.remember(marker, AccelTCG, why)
	return nil
}

// useAccel records the accelerator, and for software emulation the
// warning every front end shows.
func (b *Backend) useAccel(accel, why string) {
	b.accel = accel
	if accel == AccelTCG {
		msg := "microVM sandboxes run under " + EmulationWarning + " (no usable KVM"
		if why != "" {
			msg += ": " + why
		}
		b.limitations = append(b.limitations, msg+")")
		return
	}
	if b.kvmAccess() {
		b.limitations = append(b.limitations, fmt.Sprintf("QEMU runs as root: %s is not usable by a group", b.opts.KVMDevice))
	}
}

// kvmAccess lets QEMU open the KVM device: as the device's group when that
// group may use it, else (a root-only device) as root, which it reports.
func (b *Backend) kvmAccess() (asRoot bool) {
	var st unix.Stat_t
	if unix.Stat(b.opts.KVMDevice, &st) == nil && st.Mode&0o060 == 0o060 {
		b.kvmGroup = int(st.Gid)
		return false
	}
	b.vmmAsRoot = true
	return true
}

// probeKVM probes KVM with QEMU given access to the device.
func (b *Backend) probeKVM() error {
	b.kvmAccess()
	err := b.probe(AccelKVM)
	if err != nil {
		b.kvmGroup, b.vmmAsRoot = -1, false
	}
	return err
}

func (b *Backend) remember(marker, accel, why string) {
	if err := b.probeCache().Record(marker, []string{accel, why}); err != nil {
		b.opts.Logger.Warn("recording the microVM probe", "err", err)
	}
}

func (b *Backend) probeCache() hostside.ProbeCache {
	return hostside.ProbeCache{Dir: b.opts.ProbeCacheDir}
}

// probeMarker names the verdict of this QEMU, kernel and KVM device on
// this boot.
func (b *Backend) probeMarker() string {
	qemu := b.vmm.(*QEMUVMM).Binary
	return b.probeCache().Marker("microvm-accel-", []string{qemu, b.kernel.Image}, qemu, b.kernel.Image, b.opts.KVMDevice)
}

// kvmUsable reports why device cannot run a VM, nil when it can create
// one (whether it can boot one is the probe's to find out).
func kvmUsable(device string) error {
	fd, err := unix.Open(device, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", device, err)
	}
	defer unix.Close(fd)
	vm, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), kvmCreateVM, 0)
	if errno != 0 {
		return fmt.Errorf("%s cannot create a VM: %w", device, errno)
	}
	unix.Close(int(vm))
	return nil
}

// probe boots one machine on accel with the probe's tiny image and runs
// the probe job in it (the agent's own binary in its probe role): kernel,
// drivers, ports, protocol, cgroup and teardown all work.
func (b *Backend) probe(accel string) error {
	timeout := tcgProbeTimeout
	if accel == AccelKVM {
		timeout = kvmProbeTimeout
	}
	root, err := b.probeRoot()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, err := b.create(ctx, hostside.ProbeConfig(root, 0), accel)
	if err != nil {
		return err
	}
	return hostside.RunProbe(ctx, s, []string{goinit.GVisorProbePath, goinit.GVisorRoleProbe}, goinit.GVisorProbeOutput, timeout/2, "probe machine")
}

// probeRoot makes the probe's image directory (and its EROFS image, in
// the state directory): the mount points a
// sandbox needs and, for a dynamically linked agent, its loader and
// libraries (the probe job runs the agent's binary again, in the guest's
// root).
func (b *Backend) probeRoot() (string, error) {
	root := filepath.Join(b.opts.StateDir, "probe-root")
	if err := os.RemoveAll(root); err != nil {
		return "", err
	}
	for _, d := range []string{"proc", "dev", "tmp", "code", "etc", "root"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return "", err
		}
	}
	libs, err := sharedLibraries(b.initProgram)
	if err != nil {
		return "", err
	}
	for _, l := range libs {
		if err := copyFile(l.source, filepath.Join(root, l.name), os.FileMode(l.mode)); err != nil {
			return "", err
		}
	}
	if err := b.images.buildFixed(sandbox.Image{RootFS: root}, filepath.Join(b.opts.StateDir, "probe.erofs")); err != nil {
		return "", err
	}
	return root, nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, data, mode)
}
