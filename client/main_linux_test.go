//go:build linux

package client_test

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/scratchrun/scratchrun/internal/testenv"
)

var (
	// The servers the tests start run their sandboxes in a state
	// directory and cgroup parent of this binary's own, so that the leak
	// check at the end sees only theirs.
	env = testenv.New("client")
	lvl = env.Level("namespaces", nil)

	// binDir holds scratchrun and scratchrun-init, built for the full tier.
	binDir string
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// The fast tier: the tests against a real server skip, so the
		// binary is not built.
		os.Exit(env.Run(m))
	}
	dir, err := os.MkdirTemp("", "scratchrun-client-test-")
	if err != nil {
		panic(err)
	}
	build := exec.Command("go", "build", "-o", dir+"/", "../cmd/scratchrun", "../cmd/scratchrun-init")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		panic("build scratchrun: " + err.Error())
	}
	binDir = dir
	code := env.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// scratchrunBin is the built command.
func scratchrunBin() string { return filepath.Join(binDir, "scratchrun") }
