package nsinit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// devices are bind-mounted from the host into the sandbox's /dev: the minimal
// set programs expect, none of which reaches hardware or the host's state.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// maskedPaths are hidden inside /proc (as Docker's default does): they expose
// host kernel state that a sandbox has no need of.
var maskedPaths = []string{
	"/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys",
	"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
	"/proc/sched_debug", "/proc/scsi",
}

// readonlyPaths are made read-only inside /proc.
var readonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}

func mount(source, target, fstype string, flags uintptr, data string) error {
	if err := unix.Mount(source, target, fstype, flags, data); err != nil {
		return fmt.Errorf("mount %s on %s (%s): %w", source, target, fstype, err)
	}
	return nil
}

// buildRoot runs in init (pid 1 of fresh namespaces) and turns its copy of the
// host's mount tree into the sandbox's: an overlay of the image with a
// RAM-backed writable layer, its own /proc, /tmp and /dev, then pivot_root so
// that no host path stays reachable.
func buildRoot(s SetupMessage) error {
	if err := unix.Sethostname([]byte(s.Hostname)); err != nil {
		return fmt.Errorf("set hostname: %w", err)
	}
	if !s.JoinedNetwork {
		if err := loopbackUp(); err != nil {
			return err
		}
	}
	// Nothing we mount may propagate back to the host.
	if err := mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return err
	}
	base := s.MountDir
	if err := mount("tmpfs", base, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV,
		fmt.Sprintf("size=%d,nr_inodes=%d,mode=0755", s.WritableBytes, s.MaxInodes)); err != nil {
		return err
	}
	upper, work, root := filepath.Join(base, "upper"), filepath.Join(base, "work"), filepath.Join(base, "root")
	for _, d := range []string{upper, work, root} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", s.RootFS, upper, work)
	if err := mount("overlay", root, "overlay", unix.MS_NOSUID, opts); err != nil {
		// Inside a user namespace overlayfs keeps its metadata in user.*
		// xattrs; older kernels need to be told.
		if err2 := mount("overlay", root, "overlay", unix.MS_NOSUID, opts+",userxattr"); err2 != nil {
			return err
		}
	}
	if err := mount("proc", filepath.Join(root, "proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return err
	}
	if err := mount("tmpfs", filepath.Join(root, "tmp"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV,
		fmt.Sprintf("size=%d,nr_inodes=%d,mode=1777", s.TmpBytes, s.MaxInodes)); err != nil {
		return err
	}
	// The code directory is a small tmpfs of its own: always writable, even
	// for an unprivileged engine whose image files are not owned by the
	// sandbox's root.
	if err := os.MkdirAll(filepath.Join(root, "code"), 0o755); err != nil {
		return fmt.Errorf("create /code: %w", err)
	}
	if err := mount("tmpfs", filepath.Join(root, "code"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV,
		fmt.Sprintf("size=%d,nr_inodes=%d,mode=0755", s.TmpBytes, s.MaxInodes)); err != nil {
		return err
	}
	if err := buildDev(filepath.Join(root, "dev"), s); err != nil {
		return err
	}
	if err := maskProc(root); err != nil {
		return err
	}
	if err := pivot(root); err != nil {
		return err
	}
	if len(s.DNS) > 0 {
		return writeResolvConf(s.DNS)
	}
	return nil
}

// writeResolvConf points the sandbox at its resolvers (egress only), with
// short timeouts so a failed lookup fails fast.
func writeResolvConf(servers []string) error {
	var b strings.Builder
	for _, s := range servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	b.WriteString("options timeout:2 attempts:2\n")
	// The image's file may be a symlink (systemd images link it into /run);
	// replace it rather than write through it.
	_ = os.Remove("/etc/resolv.conf")
	if err := os.WriteFile("/etc/resolv.conf", []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write /etc/resolv.conf: %w", err)
	}
	return nil
}

// buildDev makes a minimal /dev on a small tmpfs.
func buildDev(dev string, s SetupMessage) error {
	if err := os.MkdirAll(dev, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dev, err)
	}
	if err := mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "size=64k,nr_inodes=64,mode=0755"); err != nil {
		return err
	}
	for _, name := range devices {
		target := filepath.Join(dev, name)
		if err := os.WriteFile(target, nil, 0o666); err != nil {
			return fmt.Errorf("create %s: %w", target, err)
		}
		if err := mount(filepath.Join("/dev", name), target, "", unix.MS_BIND, ""); err != nil {
			return err
		}
	}
	links := map[string]string{
		"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
		"stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return fmt.Errorf("link /dev/%s: %w", name, err)
		}
	}
	for _, d := range []string{"pts", "shm"} {
		if err := os.Mkdir(filepath.Join(dev, d), 0o755); err != nil {
			return fmt.Errorf("create /dev/%s: %w", d, err)
		}
	}
	ptsOpts := "newinstance,ptmxmode=0666,mode=0620"
	if s.MapsGroups {
		ptsOpts += ",gid=5"
	}
	if err := mount("devpts", filepath.Join(dev, "pts"), "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, ptsOpts); err != nil {
		return err
	}
	return mount("tmpfs", filepath.Join(dev, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC,
		fmt.Sprintf("size=%d,nr_inodes=%d,mode=1777", s.TmpBytes, s.MaxInodes))
}

// maskProc hides and freezes the /proc paths container runtimes hide.
func maskProc(root string) error {
	for _, p := range maskedPaths {
		target := filepath.Join(root, p)
		fi, err := os.Stat(target)
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		if fi.IsDir() {
			err = mount("tmpfs", target, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,nr_inodes=4")
		} else {
			err = mount("/dev/null", target, "", unix.MS_BIND, "")
		}
		if err != nil {
			return err
		}
	}
	for _, p := range readonlyPaths {
		target := filepath.Join(root, p)
		if _, err := os.Stat(target); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := mount(target, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return err
		}
		if err := mount("", target, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return err
		}
	}
	return nil
}

// pivot makes root the sandbox's "/" and detaches the host's tree entirely.
func pivot(root string) error {
	if err := unix.Chdir(root); err != nil {
		return fmt.Errorf("chdir %s: %w", root, err)
	}
	// pivot_root(".", ".") stacks the old root on top of the new one; the
	// lazy unmount then drops it, leaving no path back to the host.
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root %s: %w", root, err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the host's root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fmt.Errorf("chdir /: %w", err)
	}
	return nil
}
