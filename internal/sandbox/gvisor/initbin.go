package gvisor

import (
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// initBinarySource picks the init program: the configured one, else
// scratchrun-init next to the running executable, else the running
// executable itself (scratchrun, and test binaries, which call
// RunInitIfRequested first thing).
func initBinarySource(configured string) string {
	if configured != "" {
		return configured
	}
	if self, err := os.Executable(); err == nil {
		candidate := filepath.Join(filepath.Dir(self), "scratchrun-init")
		if fi, err := os.Stat(candidate); err == nil && fi.Mode().IsRegular() {
			return candidate
		}
		return self
	}
	return "/proc/self/exe"
}

// installInitBinary copies the init program into dir, world-readable and
// executable: the gofer, which serves it to the sandbox, runs as the image's
// unprivileged owner, who may not traverse the directory the engine was
// started from. Copies are named by size and mtime, so engines of different
// builds never overwrite each other's.
func installInitBinary(dir, configured string) (string, error) {
	source := initBinarySource(configured)
	src, err := os.Open(source)
	if err != nil {
		return "", fmt.Errorf("open init program %s: %w", source, err)
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return "", err
	}
	target := filepath.Join(dir, fmt.Sprintf("init-%d-%d", st.Size(), st.ModTime().UnixNano()))
	if existing, err := os.Stat(target); err == nil && existing.Size() == st.Size() {
		return target, nil
	}
	tmp, err := os.CreateTemp(dir, ".init-*")
	if err != nil {
		return "", fmt.Errorf("copy init binary: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return "", fmt.Errorf("copy init binary: %w", err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return "", fmt.Errorf("install init binary: %w", err)
	}
	return target, nil
}

// instanceName identifies this engine process in sandbox ids: its pid and
// start time, so that a later engine can tell a dead engine's leftovers from
// a live one's.
func instanceName(pid int) (string, error) {
	start, err := processStartTime(pid)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("e%d_%d", pid, start), nil
}

func processStartTime(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 20 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// engineAlive reports whether the engine that named sandbox id still runs.
// Ids that are not ours ("e<pid>_<start>_<seq>") count as alive: they are
// never touched.
func engineAlive(id string) bool {
	var pid int
	var start, seq uint64
	if n, err := fmt.Sscanf(id, "e%d_%d_%d", &pid, &start, &seq); err != nil || n != 3 {
		return true
	}
	got, err := processStartTime(pid)
	return err == nil && got == start
}

// dynamicallyLinked reports whether the program at path needs a dynamic
// loader. Inside gVisor init runs on the image's files, so a dynamically
// linked init (a test binary, or scratchrun itself when scratchrun-init is
// missing) depends on the image's C library.
func dynamicallyLinked(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}
