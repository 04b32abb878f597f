package hostside

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A verdict is kept for one boot of the host and for the binaries it was
// reached with: another boot or a changed binary names another marker.
func TestProbeCacheFollowsTheBootAndTheBinaries(t *testing.T) {
	dir := t.TempDir()
	boot, binary := filepath.Join(dir, "boot_id"), filepath.Join(dir, "runsc")
	write := func(path, content string) {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(boot, "boot-1\n")
	write(binary, "v1")
	c := ProbeCache{Dir: filepath.Join(dir, "cache"), BootIDFile: boot}
	marker := c.Marker("test-", []string{binary}, "kvm")
	if _, ok := c.Read(marker); ok {
		t.Fatal("a verdict before any probe")
	}
	if err := c.Record(marker, []string{"systrap", "KVM hangs"}); err != nil {
		t.Fatal(err)
	}
	if lines, ok := c.Read(c.Marker("test-", []string{binary}, "kvm")); !ok || !slices.Equal(lines, []string{"systrap", "KVM hangs"}) {
		t.Errorf("same boot: verdict %q, %v", lines, ok)
	}
	write(boot, "boot-2\n")
	if _, ok := c.Read(c.Marker("test-", []string{binary}, "kvm")); ok {
		t.Error("another boot read this boot's verdict")
	}
	write(boot, "boot-1\n")
	write(binary, "v2, longer")
	if _, ok := c.Read(c.Marker("test-", []string{binary}, "kvm")); ok {
		t.Error("a changed binary read the old one's verdict")
	}
	if real := (ProbeCache{Dir: dir}).Marker("test-", nil); real == (ProbeCache{Dir: dir, BootIDFile: boot}).Marker("test-", nil) {
		t.Error("the kernel's boot id is not part of the marker")
	}
}
