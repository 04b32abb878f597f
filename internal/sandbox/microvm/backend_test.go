package microvm

import (
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// A bash job runs in a guest of its own kernel and prints.
func TestRunsAProgram(t *testing.T) {
	img, _ := image(t, "bash")
	start := time.Now()
	r := run(t, config(img), sandbox.Job{Argv: []string{"/bin/bash", "-c", "echo hello; uname -r; id -u; stat -c '%u %g' /etc/shadow; cat /proc/self/cgroup; ls /dev"}})
	t.Logf("%s: exit %d\nstdout: %s\nstderr: %s", time.Since(start), r.ExitCode, r.stdout, r.stderr)
	if r.ExitCode != 0 || !strings.HasPrefix(r.stdout, "hello\n") {
		t.Errorf("exit %d, stdout %q", r.ExitCode, r.stdout)
	}
}
