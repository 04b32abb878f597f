// Package sessiontest drives a sandbox.Session as the engine does, for the
// isolation levels' own tests: plain jobs, cells on a runtime's real
// kernel (package engine/kernel), and the kernel cases every level's
// sessions must pass. Each level's tests open the session (its backend,
// its leak checks) and hand it here, so that the cases are written once.
//
// Nothing but tests may import it.
package sessiontest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/engine/kernel"
	"github.com/scratchrun/scratchrun/internal/images"
	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// Env is the environment jobs and kernels run with.
var Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root", "LANG=C.UTF-8"}

// Call is one job's outcome and output.
type Call struct {
	sandbox.Outcome
	Stdout, Stderr string
}

// Run runs script with bash as the session's next job; t fails on an
// error (not on a non-zero exit).
func Run(t testing.TB, ss sandbox.Session, timeout time.Duration, script string) Call {
	t.Helper()
	c, err := RunArgv(context.Background(), ss, timeout, "/bin/bash", "-c", script)
	if err != nil {
		t.Fatalf("run %q: %v", script, err)
	}
	return c
}

// RunArgv runs argv as the session's next job under ctx, in /tmp with
// Env, and returns what it did with RunNext's error.
func RunArgv(ctx context.Context, ss sandbox.Session, timeout time.Duration, argv ...string) (Call, error) {
	var stdout, stderr bytes.Buffer
	o, err := ss.RunNext(ctx, sandbox.Job{Argv: argv, Env: Env,
		Dir: "/tmp", Timeout: timeout, MaxReturnBytes: 1 << 20, Stdout: &stdout, Stderr: &stderr})
	return Call{o, stdout.String(), stderr.String()}, err
}

// Kernel runs cells on one kernel of a session, as the engine's session
// calls do.
type Kernel struct {
	Session sandbox.Session
	// Key is the kernel's key in the session (a session keeps one
	// interpreter per key).
	Key string
	// Argv starts the kernel (kernel.Command).
	Argv  []string
	ext   string
	cells int
}

// NewKernel is the kernel kind ("python", "node") of rt on ss, its cells'
// files named with ext.
func NewKernel(t testing.TB, ss sandbox.Session, rt images.Runtime, kind, ext string) *Kernel {
	t.Helper()
	argv, err := kernel.Command(kind, rt.WarmCommand)
	if err != nil {
		t.Fatal(err)
	}
	return &Kernel{Session: ss, Key: kind, Argv: argv, ext: ext}
}

// Cell runs src as the kernel's next cell, with timeout and the
// interrupt's grace.
func (k *Kernel) Cell(t testing.TB, timeout, interrupt time.Duration, src string) Call {
	t.Helper()
	k.cells++
	path := fmt.Sprintf("/code/cell-%d%s", k.cells, k.ext)
	var stdout, stderr bytes.Buffer
	o, err := k.Session.RunNext(context.Background(), sandbox.Job{Argv: k.Argv, Env: Env, Dir: "/tmp", Timeout: timeout, MaxReturnBytes: 1 << 20,
		Files:  []sandbox.File{{Path: path, Data: []byte(src)}},
		Stdout: &stdout, Stderr: &stderr,
		Resident: &sandbox.Resident{Key: k.Key, Argv: k.Argv, Env: Env, Dir: "/tmp", Request: kernel.Request("/tmp", path, Env),
			Interrupt: interrupt}})
	if err != nil {
		t.Fatalf("cell %d %q: %v", k.cells, src, err)
	}
	return Call{o, stdout.String(), stderr.String()}
}

// PythonKernel checks a session's Python kernel: it keeps its variables
// from job to job and shows a last bare expression; a timeout interrupts
// a busy cell (130) and keeps the kernel, while a cell that ignores the
// interrupt loses it, killed with its own processes only (a background
// process of an earlier plain job lives on); the next cell starts a fresh
// kernel. A kernel that exits, or writes a broken reply, is lost too.
// Background processes of a cell live on like a job's until their kernel
// is lost.
func PythonKernel(t *testing.T, k *Kernel) {
	t.Helper()
	const long, grace = 30 * time.Second, 2 * time.Second
	if c := k.Cell(t, long, grace, "x = 41\nprint('set')"); !c.ResidentStarted || c.ResidentLost || c.ExitCode != 0 || c.Stdout != "set\n" || !c.Separated {
		t.Fatalf("first cell: %+v, stdout %q, stderr %q", c.Outcome, c.Stdout, c.Stderr)
	}
	if c := k.Cell(t, long, grace, "x + 1"); c.ResidentStarted || c.ExitCode != 0 || c.Stdout != "42\n" {
		t.Fatalf("second cell: %+v, stdout %q, stderr %q", c.Outcome, c.Stdout, c.Stderr)
	}
	Run(t, k.Session, long, `sleep 1000 & echo $! > /tmp/bg.pid`)
	c := k.Cell(t, long, grace, `import subprocess
p = subprocess.Popen(["/bin/sleep", "1000"], start_new_session=True)
open("/tmp/kbg.pid", "w").write(str(p.pid))`)
	if c.ExitCode != 0 || c.Left != 1 {
		t.Fatalf("a cell with a background process: %+v, stderr %q", c.Outcome, c.Stderr)
	}
	if c := k.Cell(t, long, grace, "import os\nos.kill(int(open('/tmp/kbg.pid').read()), 0)\nprint('kbg-alive')"); c.Stdout != "kbg-alive\n" {
		t.Errorf("the cell's background process after it: %+v, stdout %q, stderr %q", c.Outcome, c.Stdout, c.Stderr)
	}

	c = k.Cell(t, time.Second, grace, "while True: pass")
	if !c.TimedOut || c.ExitCode != 130 || c.ResidentLost || !c.Separated || c.Ended || !strings.Contains(c.Stderr, "KeyboardInterrupt") {
		t.Fatalf("an interrupted cell: %+v, stderr %q", c.Outcome, c.Stderr)
	}
	if c := k.Cell(t, long, grace, "x"); c.ResidentStarted || c.Stdout != "41\n" {
		t.Fatalf("after the interrupt: %+v, stdout %q, stderr %q", c.Outcome, c.Stdout, c.Stderr)
	}

	c = k.Cell(t, time.Second, time.Second, "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: time.sleep(0.05)")
	if !c.TimedOut || !c.ResidentLost || c.ExitCode != 137 || !c.Separated || c.Ended {
		t.Fatalf("a cell that ignores the interrupt: %+v, stderr %q", c.Outcome, c.Stderr)
	}
	check := `kill -0 "$(cat /tmp/bg.pid)" && echo bg-alive; kill -0 "$(cat /tmp/kbg.pid)" 2>/dev/null || echo kbg-gone`
	if c := Run(t, k.Session, long, check); c.Stdout != "bg-alive\nkbg-gone\n" {
		t.Errorf("after the kernel was killed: %+v, stdout %q, stderr %q", c.Outcome, c.Stdout, c.Stderr)
	}
	if c := k.Cell(t, long, grace, "'x' in globals()"); !c.ResidentStarted || c.ResidentLost || c.Stdout != "False\n" {
		t.Fatalf("the cell after a lost kernel: %+v, stdout %q, stderr %q", c.Outcome, c.Stdout, c.Stderr)
	}

	if c := k.Cell(t, long, grace, "import os\nos._exit(3)"); !c.ResidentLost || c.ExitCode != 3 || !c.Separated {
		t.Errorf("a kernel that exits: %+v", c.Outcome)
	}
	if c := k.Cell(t, long, grace, "import os\nos.write(4, b'\\x05\\x00\\x00\\x00junk!')"); !c.ResidentStarted || !c.ResidentLost || !c.Separated || c.Ended {
		t.Errorf("a broken reply: %+v, stderr %q", c.Outcome, c.Stderr)
	}
	if c := k.Cell(t, long, grace, "print(6 * 7)"); !c.ResidentStarted || c.ExitCode != 0 || c.Stdout != "42\n" {
		t.Errorf("after a broken reply: %+v, stdout %q, stderr %q", c.Outcome, c.Stdout, c.Stderr)
	}
	if !k.Session.Alive() {
		t.Error("the session is not alive")
	}
}

// NodeKernel checks a session's Node kernel: it keeps its globals from
// job to job and shows a last expression's value; a timeout interrupts a
// busy cell (130) and keeps it.
func NodeKernel(t *testing.T, k *Kernel) {
	t.Helper()
	const long, grace = 30 * time.Second, 2 * time.Second
	if c := k.Cell(t, long, grace, "var x = 41; console.log('set')"); !c.ResidentStarted || c.ExitCode != 0 || c.Stdout != "set\n" {
		t.Fatalf("first cell: %+v, stdout %q, stderr %q", c.Outcome, c.Stdout, c.Stderr)
	}
	if c := k.Cell(t, long, grace, "x + 1"); c.ResidentStarted || c.ExitCode != 0 || c.Stdout != "42\n" {
		t.Fatalf("second cell: %+v, stdout %q, stderr %q", c.Outcome, c.Stdout, c.Stderr)
	}
	if c := k.Cell(t, time.Second, grace, "while (true) {}"); !c.TimedOut || c.ExitCode != 130 || c.ResidentLost || !c.Separated {
		t.Fatalf("an interrupted cell: %+v, stderr %q", c.Outcome, c.Stderr)
	}
	if c := k.Cell(t, long, grace, "x"); c.ResidentStarted || c.Stdout != "41\n" {
		t.Fatalf("after the interrupt: %+v, stdout %q, stderr %q", c.Outcome, c.Stdout, c.Stderr)
	}
}
