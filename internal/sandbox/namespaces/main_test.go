package namespaces

import (
	"testing"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// These tests run real namespaces sandboxes on the real images (`scratchrun
// images build`), as root; the environment (directories of the binary's
// own, the image store, the final leak check) is package testenv's. Most
// of the level's behaviour is tested through the engine's contract suite;
// what is tested here is the backend's own: session sandboxes.

var (
	env   = testenv.New("namespacestest")
	level = env.Level("namespaces", func(stateDir, cgroupParent string) (sandbox.Backend, error) {
		b, err := New(Options{StateDir: stateDir, CgroupParent: cgroupParent})
		if err != nil {
			return nil, err
		}
		return b, nil
	})
)

func TestMain(m *testing.M) { env.Main(m) }
