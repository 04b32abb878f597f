package gvisor

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// These tests run real gVisor sandboxes (runsc, built by
// scripts/install-runsc.sh) on the real images (`scratchrun images build`).
// Missing pieces fail the tests rather than skip them. The environment
// (directories of the binary's own, the image store, the final leak check)
// is package testenv's.

var (
	env   = testenv.New("gvisortest")
	level = env.Level("gvisor", func(stateDir, cgroupParent string) (sandbox.Backend, error) {
		b, err := New(Options{StateDir: stateDir, CgroupParent: cgroupParent, DebugLogDir: os.Getenv("SCRATCHRUN_TEST_RUNSC_DEBUG")})
		if err != nil {
			return nil, err
		}
		return b, nil
	})
	testStateDir     = level.StateDir
	testCgroupParent = level.CgroupParent
	leakOpts         = level.Leak
)

func TestMain(m *testing.M) {
	// Once the backend is closed, nothing of runsc's may be left in its
	// state directory either.
	env.AfterAll(func() []string { return leftoverState(true) })
	env.Main(m)
}

// backend returns the suite's backend, created once.
func backend(t testing.TB) *Backend { return testenv.RealBackend[*Backend](t, level) }

// run creates a sandbox, runs job in it and destroys it, failing the test on
// errors (not on a non-zero exit) and on an unverified teardown.
func run(t testing.TB, cfg sandbox.Config, job sandbox.Job) testenv.JobRun {
	t.Helper()
	return level.RunJob(t, cfg, job, testenv.JobLimits{Within: 2 * time.Minute, Timeout: 20 * time.Second})
}

// leftoverState lists runsc state files and bundles still in the test's
// state directory; withPin counts runsc's pinned network namespace too,
// which lives as long as the backend.
func leftoverState(withPin bool) []string {
	var out []string
	for _, pattern := range []string{"runsc/*", "bundles/*"} {
		m, _ := filepath.Glob(filepath.Join(testStateDir, pattern))
		for _, p := range m {
			if withPin || filepath.Base(p) != "null-netns" {
				out = append(out, p)
			}
		}
	}
	return out
}
