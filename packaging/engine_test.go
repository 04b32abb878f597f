package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// unitValues reads the values a unit file sets for key, in order.
func unitValues(t *testing.T, path, key string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+"="); ok {
			out = append(out, v)
		}
	}
	return out
}

// boundingSet is setpriv's --bounding-set for a unit's
// CapabilityBoundingSet (its last value, as systemd reads a single one).
func boundingSet(t *testing.T, unit string) string {
	t.Helper()
	values := unitValues(t, unit, "CapabilityBoundingSet")
	if len(values) == 0 {
		t.Fatalf("%s sets no CapabilityBoundingSet", unit)
	}
	set := "-all"
	for _, c := range strings.Fields(values[len(values)-1]) {
		set += ",+" + strings.ToLower(strings.TrimPrefix(c, "CAP_"))
	}
	return set
}

// engineCall runs `scratchrun exec args...` with binary as an engine unit
// would run it: root with the unit's bounding set and no_new_privs, in
// this test run's state directory and cgroup parent, on the host's images.
func engineCall(t *testing.T, binary, unit string, args ...string) (string, error) {
	t.Helper()
	if nnp := unitValues(t, unit, "NoNewPrivileges"); len(nnp) != 1 || nnp[0] != "yes" {
		t.Errorf("%s: NoNewPrivileges %v", unit, nnp)
	}
	cmd := exec.Command("setpriv", append([]string{"--no-new-privs", "--bounding-set", boundingSet(t, unit), binary, "exec"}, args...)...)
	cmd.Env = append(os.Environ(), "SCRATCHRUN_STATE_DIR="+lvl.StateDir, "SCRATCHRUN_CGROUP_PARENT="+lvl.CgroupParent,
		// Admission by the whole machine's CPU would turn calls away
		// when other suites load it; it is tested where it is decided.
		"SCRATCHRUN_CPU_THRESHOLD=0")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The engine units' capabilities are enough for a call at every isolation
// level, with egress (veth, nftables, gVisor's raw socket) and a timeout's
// kill, under no_new_privs: the release's binaries run each as the units
// would run them. A level whose parts this machine lacks (runsc, QEMU and
// the guest kernel: scripts/install.sh installs them) is skipped, saying so.
func TestEngineUnitCapabilities(t *testing.T) {
	bin := filepath.Join(hostBinaries(t), "scratchrun")
	for _, unit := range []string{"systemd/scratchrun.service", "systemd/scratchrun-worker.service"} {
		if a, b := boundingSet(t, unit), boundingSet(t, "systemd/scratchrun.service"); a != b {
			t.Errorf("%s's capabilities %s differ from scratchrun.service's %s", unit, a, b)
		}
	}
	unit := "systemd/scratchrun.service"
	needs := map[string]string{"gvisor": "/var/cache/scratchrun/runsc", "microvm": "/var/cache/scratchrun/microvm/kernel/current"}
	for _, level := range []string{"namespaces", "gvisor", "microvm"} {
		t.Run(level, func(t *testing.T) {
			if p := needs[level]; p != "" {
				if _, err := os.Stat(p); err != nil {
					t.Skipf("no %s here (%v): scripts/install.sh installs it", p, err)
				}
			}
			out, err := engineCall(t, bin, unit, "--isolation", level, "--allow-egress", "--network", "egress",
				"--runtime", "bash", "--code", "echo made at level; id -u")
			if err != nil || !strings.Contains(out, "made at level") {
				t.Errorf("a call with egress under the unit's capabilities: %v\n%s", err, out)
			}
			out, err = engineCall(t, bin, unit, "--isolation", level, "--timeout-ms", "1500", "--runtime", "bash", "--code", "sleep 60")
			if code := exitCode(err); code != 124 || !strings.Contains(out, "timeout") {
				t.Errorf("a call past its timeout: exit %d, want 124\n%s", code, out)
			}
		})
	}
	// The set is not vacuous: without CAP_SYS_ADMIN, no sandbox.
	cmd := exec.Command("setpriv", "--no-new-privs", "--bounding-set", "-sys_admin", bin, "exec", "--runtime", "bash", "--code", "true")
	cmd.Env = append(os.Environ(), "SCRATCHRUN_STATE_DIR="+lvl.StateDir, "SCRATCHRUN_CGROUP_PARENT="+lvl.CgroupParent)
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("a call ran without CAP_SYS_ADMIN: %s", out)
	}
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
