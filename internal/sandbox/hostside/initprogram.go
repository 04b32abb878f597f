package hostside

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// A backend that runs the Go init (package goinit) executes it from a file
// the sandbox's unprivileged owner can read: these find the program and
// install that copy.

// InitProgram picks the Go init program: configured if set, else scratchrun-init next
// to the running executable, else the running executable itself (scratchrun,
// and test binaries, which call goinit.RunIfRequested first thing).
func InitProgram(configured string) string {
	if configured != "" {
		return configured
	}
	self, err := os.Executable()
	if err != nil {
		return "/proc/self/exe"
	}
	candidate := filepath.Join(filepath.Dir(self), "scratchrun-init")
	if fi, err := os.Stat(candidate); err == nil && fi.Mode().IsRegular() {
		return candidate
	}
	return self
}

// InstallInitProgram copies the init program source into dir, world-readable and
// executable, and returns the copy's path: a sandbox's root maps to an
// unprivileged host uid that may not traverse the directory the engine was
// started from (/root, a go test temp dir). Copies are named by size and
// mtime, so engines of different builds never overwrite each other's.
func InstallInitProgram(dir, source string) (string, error) {
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
