package engine

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces"
)

// Without the spawner helper (no C compiler on the host, say), inits start
// from Go: sandboxes behave the same, cold and warm, and leave nothing.
func TestInitsStartFromGoWithoutSpawner(t *testing.T) {
	newTestEngine(t, nil) // opens the store
	parent := fmt.Sprintf("scratchrun-test-gostart-%d", os.Getpid())
	b, err := namespaces.New(namespaces.Options{StateDir: testStateDir, CgroupParent: parent, Spawner: "none"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	opts := leakcheck.Options{CgroupParent: parent, MountMarkers: []string{testStateDir, "/var/lib/scratchrun"}}
	before := leakcheck.Take(opts)
	cfg := DefaultConfig()
	cfg.Pool = PoolConfig{Floor: 1, Max: 1, Runtimes: []string{"python3.13"}, Networks: []string{"none"},
		Variants: []string{variantLight}, IdleAfter: time.Minute}
	e, err := New(cfg, testStore, b)
	if err != nil {
		t.Fatal(err)
	}
	for i, req := range []execapi.Request{
		{Runtime: "bash", Code: "echo $(( $$ < 100 )) $(id -u) $(hostname)"},
		{Runtime: "python3.13", Code: "import os; print(os.getpid() < 100, os.getuid())"},
	} {
		if req.Runtime == "python3.13" {
			waitReady(t, e, "python3.13/none/light", 1)
		}
		res := run(t, e, req)
		want := []string{"1 0 sandbox\n", "True 0\n"}[i] // a pid of its own namespace, root inside
		if res.ExitCode != 0 || res.Stdout != want {
			t.Errorf("%s: exit %d stdout %q (want %q) stderr %q", req.Runtime, res.ExitCode, res.Stdout, want, res.Stderr)
		}
	}
	e.Close()
	if left := leakcheck.WaitClean(before, opts, 5*time.Second); len(left) > 0 {
		t.Errorf("left behind:\n  %s", strings.Join(left, "\n  "))
	}
}
