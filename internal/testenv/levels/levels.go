// Package levels is the tests' table of isolation levels: how each one's
// backend is opened in a test binary's own directories. A new isolation
// level adds one line here; suites that run their tests on every level
// (package engine's contract tests) pick it up.
package levels

import (
	"os"
	"slices"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/gvisor"
	"github.com/scratchrun/scratchrun/internal/sandbox/microvm"
	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// Table lists the isolation levels, the default first. Cases, when set,
// are the only tests (by top-level name) of the contract suites that run
// on the level: a microVM under software emulation takes seconds per call,
// so it runs the cases that show its own kernel, limits, files, network
// and teardown working, within its share of CI's time.
var Table = []struct {
	Name  string
	Open  testenv.Opener
	Cases []string
}{
	{"namespaces", Namespaces, nil},
	{"gvisor", GVisor, nil},
	{"microvm", MicroVM, MicroVMCases},
}

// MicroVMCases are the contract tests the microvm level runs (package
// microvm's own suite adds what is its alone: egress, the guest's kernel,
// binary files, snapshots, twenty calls leaving nothing, the warning and
// the start-up errors).
var MicroVMCases = []string{
	"TestEachRuntimePrintsReadsAndWrites", "TestTimeoutKillsEverything", "TestMemoryLimitKills",
	"TestNothingPersistsBetweenCalls", "TestOnlyLoopbackInterface", "TestForkBombIsContained",
	"TestHostFilesAreUnreachable", "TestExitCodePassesThrough",
}

// Runs reports whether the level named level runs the top-level test
// named test.
func Runs(level, test string) bool {
	for _, l := range Table {
		if l.Name == level {
			return l.Cases == nil || slices.Contains(l.Cases, test)
		}
	}
	return true
}

// All declares every level of Table in env, in order.
func All(env *testenv.Env) []*testenv.Level {
	var out []*testenv.Level
	for _, l := range Table {
		out = append(out, env.Level(l.Name, l.Open))
	}
	return out
}

// Namespaces opens the namespaces backend.
func Namespaces(stateDir, cgroupParent string) (sandbox.Backend, error) {
	b, err := namespaces.New(namespaces.Options{StateDir: stateDir, CgroupParent: cgroupParent})
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return b, nil
}

// GVisor opens the gVisor backend; SCRATCHRUN_TEST_RUNSC_DEBUG names a
// directory for runsc's debug logs.
func GVisor(stateDir, cgroupParent string) (sandbox.Backend, error) {
	b, err := gvisor.New(gvisor.Options{StateDir: stateDir, CgroupParent: cgroupParent, DebugLogDir: os.Getenv("SCRATCHRUN_TEST_RUNSC_DEBUG")})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// MicroVM opens the microvm backend (under software emulation where KVM
// cannot boot a guest, as on this project's machines).
func MicroVM(stateDir, cgroupParent string) (sandbox.Backend, error) {
	b, err := microvm.New(microvm.Options{StateDir: stateDir, CgroupParent: cgroupParent})
	if err != nil {
		return nil, err
	}
	return b, nil
}
