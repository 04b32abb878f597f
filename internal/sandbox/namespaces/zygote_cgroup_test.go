package namespaces

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// A zygote runs, launcher and all, in a cgroup of its own below the
// sandboxes' parent, with zygoteLimits: what it holds is charged there, so
// the parent's count (admission's, the memory budget's) has it; the group
// goes with the zygote (CheckClean).
func TestZygoteRunsInItsOwnGroup(t *testing.T) {
	b := testenv.RealBackend[*Backend](t, level)
	if b.cgroups == nil {
		t.Fatal("the backend enforces no cgroup limits here")
	}
	img, rt := env.Image(t, "python3.13")
	before := level.Snapshot()
	t.Cleanup(func() { level.CheckClean(t, before) })
	z, _ := startPythonZygote(t, b, img, rt, "")
	if z.group == nil {
		t.Fatal("the zygote has no group of its own")
	}
	launcher, zygote := z.Pid(), zygoteHostPid(t, z)
	files, limited := z.group.ProcsFiles(), 0
	if len(files) != len(b.cgroups.Parents()) {
		t.Errorf("the zygote's group is in %d hierarchies, the sandboxes' parent in %d", len(files), len(b.cgroups.Parents()))
	}
	for _, procs := range files { // every hierarchy holds both
		data, err := os.ReadFile(procs)
		if err != nil {
			t.Fatal(err)
		}
		if pids := strings.Fields(string(data)); !slices.Contains(pids, strconv.Itoa(launcher)) || !slices.Contains(pids, strconv.Itoa(zygote)) {
			t.Errorf("%s holds %v, not the launcher %d and the zygote %d", procs, pids, launcher, zygote)
		}
		group := filepath.Dir(procs)
		limit := "memory.limit_in_bytes"
		if b.cgroups.Version() == cgroups.V2 {
			limit = "memory.max"
		}
		if data, err := os.ReadFile(filepath.Join(group, limit)); err == nil { // the memory controller's
			limited++
			if got := strings.TrimSpace(string(data)); got != strconv.FormatInt(zygoteLimits.MemoryBytes, 10) {
				t.Errorf("%s: %s, want %d", limit, got, zygoteLimits.MemoryBytes)
			}
		}
	}
	if limited != 1 {
		t.Errorf("%d of the group's directories have a memory limit, want 1", limited)
	}
	// Its heap was allocated in the group, so it is charged there.
	if charged, anon := z.group.MemoryUsage(), rssAnon(t, zygote); charged < anon {
		t.Errorf("the group is charged %d bytes, less than the zygote's %d of anonymous memory", charged, anon)
	}
}

// rssAnon is pid's resident anonymous memory in bytes.
func rssAnon(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "RssAnon:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatalf("no RssAnon in /proc/%d/status", pid)
	return 0
}
