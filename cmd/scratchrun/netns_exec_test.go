package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/settings"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// An engine started under `ip netns exec` (which remounts /sys, hiding
// /sys/fs/cgroup) still finds the host's cgroup hierarchy and enforces the
// memory limit; it used to run without limits, with only a warning.
func TestLimitsHoldUnderIPNetnsExec(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	if os.Geteuid() != 0 {
		t.Skip("needs root for ip netns")
	}
	name := fmt.Sprintf("scratchrun-clitest-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	defer func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del: %v: %s", err, out)
		}
	}()
	cmd := exec.Command("ip", "netns", "exec", name, binary, "exec", "--runtime", "python3.13", "--memory-mb", "64",
		"--code", "import os\nprint(os.path.exists('/sys/fs/cgroup/memory'), flush=True)\nx = bytearray(300 << 20)\nprint('not stopped')")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, _ := cmd.Output()
	if code := cmd.ProcessState.ExitCode(); code != 137 || strings.Contains(string(out), "not stopped") {
		t.Errorf("300 MiB under memory_mb 64 in `ip netns exec`: exit %d, stdout %q, stderr %q; want 137", code, out, stderr.String())
	}
	if strings.Contains(stderr.String(), "NOT enforced") || !strings.Contains(stderr.String(), "memory limit of 64 MB was hit") {
		t.Errorf("stderr %q", stderr.String())
	}
}

// Root without any reachable cgroup hierarchy (here: a mount namespace
// without /sys/fs/cgroup, in a pid namespace where no process of the host is
// visible) refuses to start, naming the variable that allows it; with the
// variable it runs, and every result says what is not enforced.
func TestRootWithoutCgroupsRefusesUnlessAllowed(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	run := func(env ...string) (string, string, int) {
		cmd := exec.Command("unshare", "--mount", "--pid", "--fork", "--mount-proc", "sh", "-c",
			`umount -l /sys/fs/cgroup && exec "$0" exec --json --runtime bash --code 'echo ran'`, binary)
		cmd.Env = append(os.Environ(), env...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, _ := cmd.Output()
		return string(out), stderr.String(), cmd.ProcessState.ExitCode()
	}
	out, stderr, code := run()
	if code == 0 || strings.Contains(out, "ran") || !strings.Contains(stderr, settings.AllowUnenforced.Env+"=1") || !strings.Contains(stderr, "NOT enforced") {
		t.Errorf("without %s: exit %d stdout %q stderr %q; want a refusal naming it", settings.AllowUnenforced.Env, code, out, stderr)
	}
	out, stderr, code = run(settings.AllowUnenforced.Env + "=1")
	if code != 0 || !strings.Contains(out, `"stdout": "ran\n"`) ||
		!strings.Contains(out, "does not enforce the memory, process-count and CPU limits") {
		t.Errorf("with %s=1: exit %d stdout %q stderr %q", settings.AllowUnenforced.Env, code, out, stderr)
	}
}
