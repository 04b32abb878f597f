package namespaces

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

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
	launcher, zygote := z.Pid(), zygoteHostPid(t, z)
	for _, parent := range b.cgroups.Parents() {
		group := groupHolding(t, parent, zygote)
		if group == "" {
			t.Errorf("no group below %s holds the zygote (%d)", parent, zygote)
			continue
		}
		if procs := groupProcs(t, group); !slices.Contains(procs, launcher) {
			t.Errorf("%s holds %v, not the launcher %d", group, procs, launcher)
		}
		usage, limit := "memory.usage_in_bytes", "memory.limit_in_bytes"
		if _, err := os.Stat(filepath.Join(group, "memory.current")); err == nil {
			usage, limit = "memory.current", "memory.max"
		}
		if _, err := os.Stat(filepath.Join(group, usage)); err != nil {
			continue // another controller's hierarchy (v1)
		}
		if got := readNumber(t, filepath.Join(group, limit)); got != zygoteLimits.MemoryBytes {
			t.Errorf("%s: %d, want %d", limit, got, zygoteLimits.MemoryBytes)
		}
		// Its heap was allocated in the group, so it is charged there.
		if charged, anon := readNumber(t, filepath.Join(group, usage)), rssAnon(t, zygote); charged < anon {
			t.Errorf("the group is charged %d bytes, less than the zygote's %d of anonymous memory", charged, anon)
		}
	}
}

// groupHolding is the group directly below parent whose cgroup.procs lists pid.
func groupHolding(t *testing.T, parent string, pid int) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(parent, "*", "cgroup.procs"))
	for _, f := range files {
		if slices.Contains(groupProcs(t, filepath.Dir(f)), pid) {
			return filepath.Dir(f)
		}
	}
	return ""
}

func groupProcs(t *testing.T, group string) []int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(group, "cgroup.procs"))
	if err != nil {
		return nil // a sandbox's group, gone meanwhile
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func readNumber(t *testing.T, file string) int64 {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return n
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
