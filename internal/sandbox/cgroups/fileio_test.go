package cgroups

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestFileIOReadsWritesAndKeepsErrnos(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := write(dir, "f", "12345"); err != nil {
		t.Fatal(err)
	}
	if got, err := readSmall(filepath.Join(dir, "f")); err != nil || string(got) != "12345" {
		t.Fatalf("readSmall = %q, %v", got, err)
	}
	big := strings.Repeat("x", smallFileMax+10)
	if err := os.WriteFile(filepath.Join(dir, "big"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := readSmall(filepath.Join(dir, "big")); err != nil || string(got) != big {
		t.Fatalf("readSmall of %d bytes read %d, %v", len(big), len(got), err)
	}
	// A seq_file answers a read with at most a page of records, however
	// large the buffer: /proc/self/maps is one, longer than a page here.
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readSmall("/proc/self/maps"); err != nil || len(got) < len(maps)*9/10 {
		t.Fatalf("readSmall of /proc/self/maps read %d bytes, os.ReadFile %d: %v", len(got), len(maps), err)
	}
	// write does not create: a cgroup file that is not there is an error
	// the callers tell apart by its errno.
	err = write(dir, "missing", "1")
	if !errors.Is(err, syscall.ENOENT) || !os.IsNotExist(errors.Unwrap(err)) {
		t.Fatalf("write to a missing file: %v", err)
	}
	if _, err := readSmall(filepath.Join(dir, "missing")); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("readSmall of a missing file: %v", err)
	}
}
