package microvm

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cavaliergopher/cpio"

	"github.com/scratchrun/scratchrun/internal/sandbox/goinit"
)

// libraryDirs are where a dynamically linked init's libraries are looked
// for on the host (Debian's multiarch layout first).
var libraryDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// initramfsFile is one file the initramfs holds.
type initramfsFile struct {
	name   string // path inside, without the leading slash
	source string // host file
	mode   int64
}

// initramfsFiles lists what the guest boots from: the Go init as /init,
// the kernel's modules with their load order, and, for a dynamically
// linked init (a test binary), its loader and libraries, copied from the
// host, so that it runs before any image is mounted.
func initramfsFiles(initProgram string, k guestKernel) ([]initramfsFile, []byte, error) {
	files := []initramfsFile{{name: strings.TrimPrefix(goinit.MicroVMInitPath, "/"), source: initProgram, mode: 0o755}}
	libs, err := sharedLibraries(initProgram)
	if err != nil {
		return nil, nil, err
	}
	files = append(files, libs...)
	var order strings.Builder
	for _, m := range k.Modules {
		name := filepath.Base(m)
		files = append(files, initramfsFile{name: strings.TrimPrefix(goinit.MicroVMModulesDir, "/") + "/" + name, source: m, mode: 0o644})
		order.WriteString(name + "\n")
	}
	return files, []byte(order.String()), nil
}

// sharedLibraries lists a dynamically linked program's loader and the
// libraries it names, at the paths the loader finds them (none for a
// static program, as scratchrun-init is).
func sharedLibraries(program string) ([]initramfsFile, error) {
	f, err := elf.Open(program)
	if err != nil {
		return nil, fmt.Errorf("init program %s: %w", program, err)
	}
	defer f.Close()
	var interp string
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			data, err := io.ReadAll(p.Open())
			if err != nil {
				return nil, err
			}
			interp = strings.TrimRight(string(data), "\x00")
		}
	}
	if interp == "" {
		return nil, nil
	}
	out := []initramfsFile{{name: strings.TrimPrefix(interp, "/"), source: interp, mode: 0o755}}
	needed, err := f.ImportedLibraries()
	if err != nil {
		return nil, err
	}
	for _, lib := range needed {
		found := ""
		for _, dir := range libraryDirs {
			if _, err := os.Stat(filepath.Join(dir, lib)); err == nil {
				found = filepath.Join(dir, lib)
				break
			}
		}
		if found == "" {
			return nil, fmt.Errorf("init program %s needs %s, which is not in %v", program, lib, libraryDirs)
		}
		out = append(out, initramfsFile{name: "lib/x86_64-linux-gnu/" + lib, source: found, mode: 0o755})
	}
	return out, nil
}

// guestDirs are the initramfs's directories: mount points of the boot and
// the parents of its files.
var guestDirs = []string{"proc", "sys", "dev", "mnt", "modules", "lib", "lib64", "lib/x86_64-linux-gnu"}

// buildInitramfs writes the initramfs (an uncompressed newc archive: the
// kernel unpacks it with no decompression, which software emulation makes
// slow) into dir, named by the hash of its content, and returns its path.
func buildInitramfs(dir, initProgram string, k guestKernel) (string, error) {
	files, order, err := initramfsFiles(initProgram, k)
	if err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".initramfs-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	w := cpio.NewWriter(io.MultiWriter(tmp, h))
	for _, d := range guestDirs {
		if err := w.WriteHeader(&cpio.Header{Name: d, Mode: cpio.TypeDir | 0o755}); err != nil {
			return "", err
		}
	}
	add := func(name string, mode int64, data io.Reader, size int64) error {
		if err := w.WriteHeader(&cpio.Header{Name: name, Mode: cpio.FileMode(cpio.TypeReg | mode), Size: size}); err != nil {
			return err
		}
		_, err := io.Copy(w, data)
		return err
	}
	for _, f := range files {
		src, err := os.Open(f.source)
		if err != nil {
			return "", fmt.Errorf("initramfs: %w", err)
		}
		st, err := src.Stat()
		if err == nil {
			err = add(f.name, f.mode, src, st.Size())
		}
		src.Close()
		if err != nil {
			return "", fmt.Errorf("initramfs: %s: %w", f.source, err)
		}
	}
	if len(order) > 0 {
		name := strings.TrimPrefix(goinit.MicroVMModulesDir, "/") + "/" + goinit.MicroVMModulesOrder
		if err := add(name, 0o644, strings.NewReader(string(order)), int64(len(order))); err != nil {
			return "", err
		}
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "initramfs-"+hex.EncodeToString(h.Sum(nil))[:16]+".cpio")
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", err
	}
	return path, nil
}
