package idmap

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
)

// image makes a one-file image owned by base, as the store writes one.
func image(t *testing.T, base uint32) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("idmapped mounts need root")
	}
	root := t.TempDir()
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, []byte("image"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{root, file} {
		if err := os.Chown(p, int(base), int(base)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// mounted reports whether dir is a mount point of this process's table.
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

func TestViewShowsTheImageToSandboxesReadOnly(t *testing.T) {
	const base = 1_000_000_000
	root := image(t, base)
	instance, err := hostside.InstanceName(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	v := NewViews(t.TempDir(), instance)
	path, err := v.Path(root, base)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := v.Path(root, base); err != nil || again != path {
		t.Errorf("second use: %q, %v; want the same view %q", again, err, path)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(path, "file"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != SandboxBase || st.Gid != SandboxBase {
		t.Errorf("the view shows the file owned by %d:%d, want %d:%d", st.Uid, st.Gid, SandboxBase, SandboxBase)
	}
	if err := os.WriteFile(filepath.Join(path, "file"), nil, 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("writing through the view: %v, want EROFS", err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if mounted(t, path) {
		t.Errorf("%s is still mounted after Close", path)
	}
}

func TestSweepRemovesOnlyDeadEnginesViews(t *testing.T) {
	const base = 1_000_000_000
	root := image(t, base)
	state := t.TempDir()
	live, err := hostside.InstanceName(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	dead, alive := NewViews(state, "e999999999_1"), NewViews(state, live)
	defer alive.Close()
	deadPath, err := dead.Path(root, base)
	if err != nil {
		t.Fatal(err)
	}
	livePath, err := alive.Path(root, base)
	if err != nil {
		t.Fatal(err)
	}
	// The dead engine never closed: the next one sweeps.
	n, err := SweepViews(state, hostside.InstanceAlive)
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v; want 1 engine's views removed", n, err)
	}
	if mounted(t, deadPath) {
		t.Errorf("the dead engine's view %s is still mounted", deadPath)
	}
	if _, err := os.Stat(filepath.Dir(deadPath)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead engine's directory: %v, want it gone", err)
	}
	if !mounted(t, livePath) {
		t.Errorf("the live engine's view %s was removed", livePath)
	}
}

func TestViewRefusesAnImageOwnedBySandboxes(t *testing.T) {
	root := image(t, SandboxBase)
	v := NewViews(t.TempDir(), "e1_1")
	defer v.Close()
	if path, err := v.Path(root, SandboxBase); err == nil {
		t.Errorf("an image owned by the sandboxes' uids got a view %s", path)
	}
}
