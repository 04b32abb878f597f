package engine

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces"
)

// When the spawner helper (which starts every namespaces sandbox and carries
// its init) dies, the backend starts a new one, and the next calls work.
func TestSpawnerDeathIsSurvived(t *testing.T) {
	newTestEngine(t, nil) // opens the store
	parent := fmt.Sprintf("scratchrun-test-respawn-%d", os.Getpid())
	b, err := namespaces.New(namespaces.Options{StateDir: testStateDir, CgroupParent: parent})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	opts := leakcheck.Options{CgroupParent: parent, MountMarkers: []string{testStateDir, "/var/lib/scratchrun"}}
	before := leakcheck.Take(opts)
	e, err := New(DefaultConfig(), testStore, b)
	if err != nil {
		t.Fatal(err)
	}
	req := execapi.Request{Runtime: "bash", Code: "echo $(( $$ < 100 )) $(id -u) $(hostname)"}
	check := func(when string) {
		res := run(t, e, req)
		if res.ExitCode != 0 || res.Stdout != "1 0 sandbox\n" {
			t.Errorf("%s: exit %d stdout %q stderr %q", when, res.ExitCode, res.Stdout, res.Stderr)
		}
	}
	check("before")
	old := b.SpawnerPid()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if syscall.Kill(old, 0) != nil {
			break
		}
	}
	check("after the helper died")
	check("again")
	if n := b.SpawnerRestarts(); n != 1 || b.SpawnerPid() == old {
		t.Errorf("restarts %d, helper pid %d (was %d)", n, b.SpawnerPid(), old)
	}
	e.Close()
	if left := leakcheck.WaitClean(before, opts, 5*time.Second); len(left) > 0 {
		t.Errorf("left behind:\n  %s", strings.Join(left, "\n  "))
	}
}
