package hostside

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
)

// A sweep removes the groups of a dead engine, killing what runs in them,
// once per group however many hierarchies hold it, and leaves a live
// engine's groups and groups not named as sandboxes alone.
func TestSweepDeadEnginesRemovesOnlyTheDeadOnes(t *testing.T) {
	if testing.Short() { // the fast tier: see docs/design.md, "Test tiers"
		t.Skip("skipped under -short (the fast tier): creates cgroups, as root")
	}
	if os.Geteuid() != 0 {
		t.Fatal("needs root to create cgroups")
	}
	m, err := cgroups.New(fmt.Sprintf("scratchrun-hostsidetest-%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	self, err := InstanceName(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	dead := strings.Replace(self, "_", "_9", 1) + "_1" // this pid, another start time
	live := self + "_1"
	var groups []*cgroups.Group
	for _, name := range []string{dead, live, "not-ours"} {
		g, err := m.Create(name, cgroups.Limits{MaxPids: 8})
		if err != nil {
			t.Fatal(err)
		}
		groups = append(groups, g)
	}
	t.Cleanup(func() {
		for _, g := range groups {
			g.KillAll()
			g.Destroy()
		}
		m.RemoveParent()
	})
	orphan := exec.Command("sleep", "60")
	orphan.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- orphan.Wait() }()
	if err := groups[0].AddProcess(orphan.Process.Pid); err != nil {
		t.Fatal(err)
	}

	n, err := SweepDeadEngines(m)
	if n != 1 || err != nil {
		t.Errorf("SweepDeadEngines = %d, %v; want 1 group removed", n, err)
	}
	if err := <-exited; err == nil {
		t.Error("the dead engine's process was not killed")
	}
	var left []string
	for _, dir := range m.Leftovers() {
		left = append(left, filepath.Base(dir))
	}
	for _, name := range []string{live, "not-ours"} {
		if !slices.Contains(left, name) {
			t.Errorf("group %s was swept; left %v", name, left)
		}
	}
	if slices.Contains(left, dead) {
		t.Errorf("the dead engine's group %s is still there", dead)
	}
	if n, err := SweepDeadEngines(nil); n != 0 || err != nil {
		t.Errorf("sweep without cgroups = %d, %v", n, err)
	}
}
