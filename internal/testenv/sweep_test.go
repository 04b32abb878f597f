package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
)

// What a killed run left (a level's cgroup parent with a sandbox's group
// still holding a process, a mount below its state directory) is removed
// by the next run of the suite; a running binary's level is left alone.
func TestSweepDeadRuns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: cgroups and mounts")
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("scratchrun-sweeptest-%d-namespaces", dead.Process.Pid)
	alive := fmt.Sprintf("scratchrun-sweeptest-%d-namespaces", os.Getppid())

	m, err := cgroups.New(name)
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Create("e1_1_1", cgroups.Limits{MaxPids: 16})
	if err != nil {
		t.Fatal(err)
	}
	left := exec.Command("sleep", "600")
	if err := left.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- left.Wait() }()
	defer left.Process.Kill()
	if err := g.AddProcess(left.Process.Pid); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join("/run", name, "mnt")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(mnt, unix.MNT_DETACH)
	keep := filepath.Join("/run", alive)
	if err := os.MkdirAll(keep, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(keep)

	New("sweeptest").sweepDeadRuns()

	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Error("the process left in the dead run's group still runs")
	}
	if ms := mountsBelow(filepath.Join("/run", name)); len(ms) > 0 {
		t.Errorf("still mounted: %v", ms)
	}
	for _, pattern := range []string{"/run/" + name, "/sys/fs/cgroup/*/" + name, "/sys/fs/cgroup/" + name} {
		if dirs, _ := filepath.Glob(pattern); len(dirs) > 0 {
			t.Errorf("still there: %v", dirs)
		}
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("the level of a running binary was removed: %v", err)
	}
}
