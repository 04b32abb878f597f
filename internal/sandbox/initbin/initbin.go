// Package initbin is what the sandbox backends' engine sides share about
// their inits and their own identity: the engine instance name that lets a
// later engine tell a dead engine's leftovers from a live one's, the job's
// side of the init protocol (job.go), and, for gVisor's Go init, where the
// init binary is and a copy of it an unprivileged sandbox uid can execute.
//
// It only reads /proc and copies one file; it never starts anything.
package initbin

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Source picks the init program: configured if set, else scratchrun-init next
// to the running executable, else the running executable itself (scratchrun,
// and test binaries, which call RunInitIfRequested first thing).
func Source(configured string) string {
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

// Install copies the init program source into dir, world-readable and
// executable, and returns the copy's path: a sandbox's root maps to an
// unprivileged host uid that may not traverse the directory the engine was
// started from (/root, a go test temp dir). Copies are named by size and
// mtime, so engines of different builds never overwrite each other's.
func Install(dir, source string) (string, error) {
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

// InstanceName identifies the engine process pid in sandbox names as
// "e<pid>_<start time>".
func InstanceName(pid int) (string, error) {
	start, err := processStartTime(pid)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("e%d_%d", pid, start), nil
}

// EngineAlive reports whether the engine that named sandbox id
// ("e<pid>_<start>_<seq>") still runs. Names that are not of that shape count
// as alive, so that nothing not ours is ever touched.
func EngineAlive(id string) bool {
	var pid int
	var start, seq uint64
	if n, err := fmt.Sscanf(id, "e%d_%d_%d", &pid, &start, &seq); err != nil || n != 3 {
		return true
	}
	got, err := processStartTime(pid)
	return err == nil && got == start
}

func processStartTime(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces and parentheses: fields start after
	// the last ')'.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 20 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	return strconv.ParseUint(fields[19], 10, 64)
}
