package goinit

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Where the guest's root is put together, in the initramfs, before init
// moves into it. Nothing of these is reachable from the root afterwards.
const (
	guestImageDir = "/mnt/image"
	guestRWDir    = "/mnt/rw"
	guestRootDir  = "/mnt/root"
)

// buildGuestRoot mounts the image's read-only drive under an overlay whose
// writable layer is a tmpfs of writableBytes (RAM, gone with the VM: the
// drive itself is read-only on the host too), gives it a /proc and a
// /dev of the same few devices as the other backends' sandboxes, and makes
// it init's root (the initramfs stays below, out of reach).
func buildGuestRoot(device string, writableBytes int64) error {
	for _, d := range []string{guestImageDir, guestRWDir, guestRootDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := mount(device, guestImageDir, "erofs", unix.MS_RDONLY|unix.MS_NODEV, ""); err != nil {
		return err
	}
	size := ""
	if writableBytes > 0 {
		size = fmt.Sprintf(",size=%d", writableBytes)
	}
	if err := mount("tmpfs", guestRWDir, "tmpfs", unix.MS_NODEV, "mode=0755"+size); err != nil {
		return err
	}
	for _, d := range []string{guestRWDir + "/upper", guestRWDir + "/work"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	if err := mount("overlay", guestRootDir, "overlay", unix.MS_NODEV,
		"lowerdir="+guestImageDir+",upperdir="+guestRWDir+"/upper,workdir="+guestRWDir+"/work"); err != nil {
		return err
	}
	if err := mount("proc", guestRootDir+"/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return err
	}
	if err := makeDev(guestRootDir + "/dev"); err != nil {
		return err
	}
	if err := os.Chdir(guestRootDir); err != nil {
		return err
	}
	if err := mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return err
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("chroot into the sandbox's root: %w", err)
	}
	return os.Chdir("/")
}

// guestDevices are the device nodes a sandbox's /dev holds, as in the
// namespaces backend (major, minor of character devices).
var guestDevices = []struct {
	name         string
	major, minor uint32
}{
	{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0},
}

// makeDev mounts a small tmpfs on dir with guestDevices, a private devpts
// and the usual links: not the guest's devtmpfs, which holds the ports and
// the root drive.
func makeDev(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=65536,nr_inodes=64"); err != nil {
		return err
	}
	for _, d := range guestDevices {
		if err := unix.Mknod(dir+"/"+d.name, unix.S_IFCHR|0o666, int(unix.Mkdev(d.major, d.minor))); err != nil {
			return fmt.Errorf("mknod /dev/%s: %w", d.name, err)
		}
		// The umask took bits off.
		if err := os.Chmod(dir+"/"+d.name, 0o666); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir+"/pts", 0o755); err != nil {
		return err
	}
	if err := mount("devpts", dir+"/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return err
	}
	for link, target := range map[string]string{
		"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, dir+"/"+link); err != nil {
			return err
		}
	}
	return nil
}
