// Package levels is the tests' table of isolation levels: how each one's
// backend is opened in a test binary's own directories. A new isolation
// level adds one line here; suites that run their tests on every level
// (package engine's contract tests) pick it up.
package levels

import (
	"os"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/gvisor"
	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// Table lists the isolation levels, the default first.
var Table = []struct {
	Name string
	Open testenv.Opener
}{
	{"namespaces", Namespaces},
	{"gvisor", GVisor},
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
