package gvisor

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// What an engine killed with SIGKILL leaves (runsc state, bundle, cgroups on
// every hierarchy) is removed by the next engine's sweep; a live engine's
// sandboxes are left alone.
func TestSweepRemovesDeadEnginesLeftovers(t *testing.T) {
	b := backend(t)
	img, _ := env.Image(t, "bash")
	before := leakcheck.Take(leakOpts)
	// A backend as a crashed engine had it: same directories, the name of
	// an engine that no longer runs (no pid is that large).
	dead := &Backend{opts: b.opts, runsc: b.runsc, platform: b.platform, runscRoot: b.runscRoot, bundles: b.bundles,
		initPath: b.initPath, cgroups: b.cgroups, instance: "e999999999_1", overhead: b.overhead,
		confinement: b.confinement, initCaps: b.initCaps}
	orphan, err := dead.create(context.Background(), testenv.SandboxConfig(img), b.platform)
	if err != nil {
		t.Fatal(err)
	}
	live, err := b.Create(context.Background(), testenv.SandboxConfig(img))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Destroy()
	// The engine dies: runsc goes with SIGKILL, and the Sentry and gofer
	// with it (parent-death signal); nothing cleans up.
	orphan.cmd.Process.Signal(syscall.SIGKILL)
	<-orphan.waitDone
	if len(dead.stateFiles(orphan.id)) == 0 || len(groupDirs(testCgroupParent, orphan.id)) == 0 {
		t.Fatalf("the simulated crash left nothing to sweep (state %v, cgroups %v)", dead.stateFiles(orphan.id), groupDirs(testCgroupParent, orphan.id))
	}
	if _, err := os.Stat(orphan.bundle); err != nil {
		t.Fatalf("no bundle left: %v", err)
	}
	n, err := b.sweep()
	if err != nil || n != 1 {
		t.Errorf("sweep = %d, %v; want 1 sandbox removed", n, err)
	}
	if left := dead.stateFiles(orphan.id); len(left) > 0 {
		t.Errorf("state left: %v", left)
	}
	if left := groupDirs(testCgroupParent, orphan.id); len(left) > 0 {
		t.Errorf("cgroups left: %v", left)
	}
	if _, err := os.Stat(filepath.Join(b.bundles, orphan.id)); !os.IsNotExist(err) {
		t.Errorf("bundle left: %v", err)
	}
	// The live engine's sandbox still works.
	s := live.(*gvSandbox)
	if s.exited() || len(groupDirs(testCgroupParent, s.id)) == 0 {
		t.Fatal("sweep touched a live engine's sandbox")
	}
	if td := live.Destroy(); !td.Purged {
		t.Errorf("teardown: %v", td.Err)
	}
	orphan.closeFiles()
	if left := leakcheck.WaitClean(before, leakOpts, 10*time.Second); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	if procs := runscProcesses(); len(procs) > 0 {
		t.Errorf("runsc processes left: %v", procs)
	}
}
