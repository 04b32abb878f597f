package microvm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// These tests boot real microVMs (QEMU and the guest kernel, installed by
// scripts/install-microvm.sh) on the real images (`scratchrun images
// build`), under software emulation on this project's machines. Missing
// pieces fail the tests rather than skip them. The environment
// (directories of the binary's own, the image store, the final leak check)
// is package testenv's.

var (
	env   = testenv.New("microvmtest")
	level = env.Level("microvm", func(stateDir, cgroupParent string) (sandbox.Backend, error) {
		b, err := New(Options{StateDir: stateDir, CgroupParent: cgroupParent})
		if err != nil {
			return nil, err
		}
		return b, nil
	})
)

func TestMain(m *testing.M) {
	// Once the backend is closed, nothing of it may be left in its state
	// directory, and no QEMU of this binary's may run.
	env.AfterAll(leftovers)
	env.Main(m)
}

// backend returns the suite's backend, created once.
func backend(t testing.TB) *Backend { return testenv.RealBackend[*Backend](t, level) }

// run creates a sandbox, runs job in it and destroys it, failing the test on
// errors (not on a non-zero exit) and on an unverified teardown. A guest
// boots under software emulation here: the bounds are wider than other
// levels', and the job's memory limit is the configuration's unless it
// sets one (the agent applies it to the guest cgroup of user code).
func run(t testing.TB, cfg sandbox.Config, job sandbox.Job) testenv.JobRun {
	t.Helper()
	if job.MemoryBytes == 0 {
		job.MemoryBytes = cfg.MemoryBytes
	}
	return level.RunJob(t, cfg, job, testenv.JobLimits{Within: 5 * time.Minute, Timeout: 30 * time.Second})
}

// leftovers lists what the suite's backend left in its state directory,
// and any QEMU still running with a file of it (its initramfs).
func leftovers() []string {
	var out []string
	entries, _ := os.ReadDir(level.StateDir)
	for _, e := range entries {
		out = append(out, level.StateDir+"/"+e.Name())
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if data, err := os.ReadFile(p); err == nil && strings.Contains(string(data), level.StateDir+"/") {
			out = append(out, "process "+filepath.Base(filepath.Dir(p))+": "+strings.ReplaceAll(string(data), "\x00", " "))
		}
	}
	return out
}
