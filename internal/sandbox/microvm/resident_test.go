package microvm

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/sessiontest"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// In one guest, as on namespaces (TestSessionPythonKernel there), a
// session's Python kernel keeps its variables from job to job; a timeout
// interrupts a busy cell (130) and keeps the kernel, while a cell that
// ignores the interrupt loses it with its tree, and the next cell starts
// a fresh one; a kernel that exits is lost with its status. Teardown
// leaves nothing.
func TestSessionPythonKernelInOneGuest(t *testing.T) {
	b := backend(t)
	img, rt := env.Image(t, "python3.13")
	before := level.Snapshot()
	cfg := testenv.SandboxConfig(img)
	cfg.Session = true
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sb, err := b.Create(ctx, cfg)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	defer func() {
		if td := sb.Destroy(); !td.Purged {
			t.Errorf("teardown not verified: %v", td.Err)
		}
		level.CheckClean(t, before)
		if left := qemuProcesses(b); len(left) > 0 {
			t.Errorf("QEMU processes left: %v", left)
		}
	}()
	ss, ok := sandbox.SandboxAs[sandbox.Session](sb)
	if !ok {
		t.Fatal("a sandbox created with Config.Session has no Session")
	}
	k := sessiontest.NewKernel(t, ss, rt, "python", ".py")
	cell := func(timeout, interrupt time.Duration, src string) sessiontest.Call {
		t.Helper()
		return k.Cell(t, timeout, interrupt, src)
	}
	const long, grace = time.Minute, 5 * time.Second
	if c := cell(long, grace, "x = 41\nprint('set')"); !c.ResidentStarted || c.ExitCode != 0 || c.Stdout != "set\n" || !c.Separated {
		t.Fatalf("first cell: %+v, stdout %q, stderr %q", c.Outcome, c.Stdout, c.Stderr)
	}
	if c := cell(long, grace, "x + 1"); c.ResidentStarted || c.Stdout != "42\n" {
		t.Fatalf("second cell: %+v, stdout %q, stderr %q", c.Outcome, c.Stdout, c.Stderr)
	}
	if c := cell(2*time.Second, grace, "while True: pass"); !c.TimedOut || c.ExitCode != 130 || c.ResidentLost || c.Ended || !strings.Contains(c.Stderr, "KeyboardInterrupt") {
		t.Fatalf("an interrupted cell: %+v, stderr %q", c.Outcome, c.Stderr)
	}
	c := cell(2*time.Second, time.Second, "import signal, subprocess, time\nsubprocess.Popen(['/bin/sleep', '1000'])\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: time.sleep(0.05)")
	if !c.TimedOut || !c.ResidentLost || c.ExitCode != 137 || !c.Separated || c.Ended {
		t.Fatalf("a cell that ignores the interrupt: %+v, stderr %q", c.Outcome, c.Stderr)
	}
	if c := cell(long, grace, "import subprocess\nprint('x' in globals(), subprocess.run(['pgrep', '-x', 'sleep']).returncode)"); !c.ResidentStarted || c.Stdout != "False 1\n" {
		t.Fatalf("the cell after a lost kernel: %+v, stdout %q, stderr %q", c.Outcome, c.Stdout, c.Stderr)
	}
	if c := cell(long, grace, "import os\nos._exit(3)"); !c.ResidentLost || c.ExitCode != 3 || !c.Separated {
		t.Errorf("a kernel that exits: %+v", c.Outcome)
	}
	if !ss.Alive() {
		t.Error("the session is not alive")
	}
}
