package goinit

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// loadModules loads the modules dir's order file names, in that order (the
// backend wrote it with each module after those it depends on). A module
// the kernel already has (built in, or loaded) is fine.
func loadModules(dir string) error {
	f, err := os.Open(filepath.Join(dir, MicroVMModulesOrder))
	if errors.Is(err, os.ErrNotExist) {
		return nil // a kernel with every driver built in
	} else if err != nil {
		return err
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		name := strings.TrimSpace(lines.Text())
		if name == "" {
			continue
		}
		if err := loadModule(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return lines.Err()
}

func loadModule(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("load module: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.FinitModule(fd, "", 0); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("load module %s: %w", filepath.Base(path), err)
	}
	return nil
}

// openPorts waits until every named virtio-serial port has appeared and
// opens it. The guest kernel names a port's device vportNpM; its name, as
// the host gave it, is in sysfs.
func openPorts(names []string, wait time.Duration) (map[string]*os.File, error) {
	deadline := time.Now().Add(wait)
	for {
		found := map[string]string{}
		entries, _ := os.ReadDir("/sys/class/virtio-ports")
		for _, e := range entries {
			name, err := os.ReadFile(filepath.Join("/sys/class/virtio-ports", e.Name(), "name"))
			if err == nil {
				found[strings.TrimSpace(string(name))] = filepath.Join("/dev", e.Name())
			}
		}
		missing := ""
		for _, n := range names {
			if _, err := os.Stat(found[n]); found[n] == "" || err != nil {
				missing = n
				break
			}
		}
		if missing == "" {
			ports := map[string]*os.File{}
			for _, n := range names {
				f, err := os.OpenFile(found[n], os.O_RDWR, 0)
				if err != nil {
					return nil, fmt.Errorf("open port %s: %w", n, err)
				}
				ports[n] = f
			}
			return ports, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("virtio-serial port %q did not appear within %s", missing, wait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// randPoolInfo is the kernel's struct rand_pool_info with room for a seed.
type randPoolInfo struct {
	entropyBits int32
	size        int32
	buf         [256]byte
}

// reseed credits seed to the guest kernel's random pool and makes it
// reseed its generator at once (RNDRESEEDCRNG), so that what user code
// reads next depends on the seed, not on a snapshot's state.
func reseed(seed []byte) error {
	info := randPoolInfo{}
	n := copy(info.buf[:], seed)
	info.size, info.entropyBits = int32(n), int32(8*n)
	fd, err := unix.Open("/dev/urandom", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("reseed: %w", err)
	}
	defer unix.Close(fd)
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.RNDADDENTROPY, uintptr(unsafe.Pointer(&info))); errno != 0 {
		return fmt.Errorf("reseed: add entropy: %w", errno)
	}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.RNDRESEEDCRNG, 0); errno != 0 {
		return fmt.Errorf("reseed: %w", errno)
	}
	return nil
}
