package microvm

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/engine/kernel"
	"github.com/scratchrun/scratchrun/internal/sandbox"
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
	argv, err := kernel.Command("python", rt.WarmCommand)
	if err != nil {
		t.Fatal(err)
	}
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
	cells := 0
	cell := func(timeout, interrupt time.Duration, src string) sessionCall {
		t.Helper()
		cells++
		path := fmt.Sprintf("/code/cell-%d.py", cells)
		env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root", "LANG=C.UTF-8"}
		var stdout, stderr bytes.Buffer
		o, err := ss.RunNext(ctx, sandbox.Job{Argv: argv, Env: env, Dir: "/tmp", Timeout: timeout, MaxReturnBytes: 1 << 20,
			Files: []sandbox.File{{Path: path, Data: []byte(src)}}, Stdout: &stdout, Stderr: &stderr,
			Resident: &sandbox.Resident{Key: "python", Argv: argv, Env: env, Dir: "/tmp", Request: kernel.Request("/tmp", path, env), Interrupt: interrupt}})
		if err != nil {
			t.Fatalf("cell %d %q: %v", cells, src, err)
		}
		return sessionCall{o, stdout.String(), stderr.String()}
	}
	const long, grace = time.Minute, 5 * time.Second
	if c := cell(long, grace, "x = 41\nprint('set')"); !c.ResidentStarted || c.ExitCode != 0 || c.stdout != "set\n" || !c.Separated {
		t.Fatalf("first cell: %+v, stdout %q, stderr %q", c.Outcome, c.stdout, c.stderr)
	}
	if c := cell(long, grace, "x + 1"); c.ResidentStarted || c.stdout != "42\n" {
		t.Fatalf("second cell: %+v, stdout %q, stderr %q", c.Outcome, c.stdout, c.stderr)
	}
	if c := cell(2*time.Second, grace, "while True: pass"); !c.TimedOut || c.ExitCode != 130 || c.ResidentLost || c.Ended || !strings.Contains(c.stderr, "KeyboardInterrupt") {
		t.Fatalf("an interrupted cell: %+v, stderr %q", c.Outcome, c.stderr)
	}
	c := cell(2*time.Second, time.Second, "import signal, subprocess, time\nsubprocess.Popen(['/bin/sleep', '1000'])\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: time.sleep(0.05)")
	if !c.TimedOut || !c.ResidentLost || c.ExitCode != 137 || !c.Separated || c.Ended {
		t.Fatalf("a cell that ignores the interrupt: %+v, stderr %q", c.Outcome, c.stderr)
	}
	if c := cell(long, grace, "import subprocess\nprint('x' in globals(), subprocess.run(['pgrep', '-x', 'sleep']).returncode)"); !c.ResidentStarted || c.stdout != "False 1\n" {
		t.Fatalf("the cell after a lost kernel: %+v, stdout %q, stderr %q", c.Outcome, c.stdout, c.stderr)
	}
	if c := cell(long, grace, "import os\nos._exit(3)"); !c.ResidentLost || c.ExitCode != 3 || !c.Separated {
		t.Errorf("a kernel that exits: %+v", c.Outcome)
	}
	if !ss.Alive() {
		t.Error("the session is not alive")
	}
}
