package microvm

import (
	"context"
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

// Timings of the parts of one call, for the report (not asserted).
func TestBootTimings(t *testing.T) {
	b := backend(t)
	img, _ := image(t, "python3.13")
	for i := 0; i < 3; i++ {
		start := time.Now()
		ctx := context.Background()
		s, err := b.Create(ctx, config(img))
		if err != nil {
			t.Fatal(err)
		}
		booted := time.Since(start)
		var out strings.Builder
		o, err := s.Run(ctx, sandbox.Job{Argv: []string{"/usr/bin/python3", "-c", "print(1)"}, Dir: "/tmp", Timeout: 30 * time.Second,
			MaxReturnBytes: 1, MemoryBytes: 256 << 20, Env: []string{"PATH=/usr/bin:/bin"}, Stdout: &out, Stderr: &out})
		ran := time.Since(start)
		td := s.Destroy()
		t.Logf("create %s, run %s (program %s), destroy %s: exit %d %q purged %v", booted, ran-booted, o.Duration, time.Since(start)-ran, o.ExitCode, out.String(), td.Purged)
		if err != nil {
			t.Fatal(err)
		}
	}
}
