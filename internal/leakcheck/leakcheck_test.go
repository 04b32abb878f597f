package leakcheck

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The checker must see what it is meant to catch: a child process left
// running (with its own namespaces) and a cgroup left behind.
func TestDetectsLeftoverProcessNamespaceAndCgroup(t *testing.T) {
	parent := fmt.Sprintf("scratchrun-leakcheck-%d", os.Getpid())
	opts := Options{CgroupParent: parent}
	before := Take(opts)

	child := exec.Command("unshare", "--user", "--map-root-user", "--net", "sleep", "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var groups []string
	if os.Geteuid() == 0 {
		matches, _ := filepath.Glob("/sys/fs/cgroup/memory")
		for _, m := range matches {
			dir := filepath.Join(m, parent, "left")
			if err := os.MkdirAll(dir, 0o755); err == nil {
				groups = append(groups, dir)
			}
		}
	}
	time.Sleep(100 * time.Millisecond)
	left := strings.Join(NewSince(before, Take(opts)), "\n")
	for _, want := range []string{"process ", "namespace net:[", "namespace user:["} {
		if !strings.Contains(left, want) {
			t.Errorf("leftovers %q lack %q", left, want)
		}
	}
	for _, g := range groups {
		if !strings.Contains(left, "cgroup "+g) {
			t.Errorf("leftovers %q lack cgroup %s", left, g)
		}
	}

	child.Process.Kill()
	child.Wait()
	for _, g := range groups {
		os.Remove(g)
		os.Remove(filepath.Dir(g))
	}
	if still := WaitClean(before, opts, 5*time.Second); len(still) > 0 {
		t.Errorf("after cleanup, still reported: %v", still)
	}
}
