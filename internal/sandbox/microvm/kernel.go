package microvm

import (
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// guestModules are the drivers the guest agent loads, when the kernel has
// them as modules (Debian's cloud kernel does): the virtio PCI transport,
// the block device (the image), its serial
// ports (the protocol), EROFS (the image's file system), overlayfs (the
// writable layer over it) and the network device (egress). Their own
// dependencies are found in each module's .modinfo.
var guestModules = []string{"virtio_pci", "virtio_blk", "virtio_console", "erofs", "overlay", "virtio_net"}

// guestKernel is a kernel the guest boots and the modules it needs.
type guestKernel struct {
	// Image is the kernel image (bzImage, or an uncompressed vmlinux with a
	// PVH entry point).
	Image string
	// Release is the kernel's version string, as `uname -r` shows it.
	Release string
	// Modules are module files in load order (empty for a kernel with
	// every driver built in).
	Modules []string
}

// findKernel reads a guest kernel from path: a directory laid out as a
// Debian kernel package unpacked (boot/vmlinuz-RELEASE and
// lib/modules/RELEASE/), as scripts/install-microvm.sh caches one, or a
// kernel image file with every driver built in.
func findKernel(path string) (guestKernel, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return guestKernel{}, fmt.Errorf("guest kernel: %w (run scripts/install-microvm.sh, or set SCRATCHRUN_MICROVM_KERNEL)", err)
	}
	if fi.Mode().IsRegular() {
		return guestKernel{Image: path}, nil
	}
	images, _ := filepath.Glob(filepath.Join(path, "boot", "vmlinuz-*"))
	if len(images) != 1 {
		return guestKernel{}, fmt.Errorf("guest kernel: want one boot/vmlinuz-* in %s, found %d", path, len(images))
	}
	k := guestKernel{Image: images[0], Release: strings.TrimPrefix(filepath.Base(images[0]), "vmlinuz-")}
	modDir := filepath.Join(path, "lib", "modules", k.Release)
	if _, err := os.Stat(modDir); err != nil {
		return guestKernel{}, fmt.Errorf("guest kernel: modules of %s: %w", k.Release, err)
	}
	if k.Modules, err = moduleOrder(modDir, guestModules); err != nil {
		return guestKernel{}, err
	}
	return k, nil
}

// moduleOrder finds the named modules under dir and every module they
// depend on, and orders them so that each comes after its dependencies.
// A name not found as a module is taken to be built in (modules.builtin
// says so, when the kernel package has one).
func moduleOrder(dir string, names []string) ([]string, error) {
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name, ok := strings.CutSuffix(d.Name(), ".ko"); ok && d.Type().IsRegular() {
			files[strings.ReplaceAll(name, "-", "_")] = p
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("guest kernel modules: %w", err)
	}
	builtin, _ := os.ReadFile(filepath.Join(dir, "modules.builtin"))
	var order []string
	visiting := map[string]bool{}
	var visit func(name string) error
	visit = func(name string) error {
		name = strings.ReplaceAll(name, "-", "_")
		file, ok := files[name]
		if !ok {
			if strings.Contains(string(builtin), "/"+name+".ko") || len(builtin) == 0 {
				return nil
			}
			return fmt.Errorf("guest kernel: module %s is neither in %s nor built in", name, dir)
		}
		if slices.Contains(order, file) {
			return nil
		}
		if visiting[name] {
			return fmt.Errorf("guest kernel: modules depend on each other in a circle at %s", name)
		}
		visiting[name] = true
		deps, err := moduleDepends(file)
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := visit(d); err != nil {
				return err
			}
		}
		order = append(order, file)
		return nil
	}
	for _, n := range names {
		if err := visit(n); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// moduleDepends reads a module's "depends=" from its .modinfo section
// (what depmod reads; the unpacked package has no modules.dep).
func moduleDepends(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("guest kernel module %s: %w", path, err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("guest kernel module %s: no .modinfo", path)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, err
	}
	for _, field := range strings.Split(string(data), "\x00") {
		if v, ok := strings.CutPrefix(field, "depends="); ok {
			if v == "" {
				return nil, nil
			}
			return strings.Split(v, ","), nil
		}
	}
	return nil, errors.New("guest kernel module " + path + ": no depends= field")
}
