package gvisor

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/engine/kernel"
	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// kernelSession is a session sandbox with the command line of its
// runtime's real kernel (package engine/kernel), as the engine starts it.
type kernelSession struct {
	ss    sandbox.Session
	kind  string
	argv  []string
	ext   string
	cells int
}

func openKernelSession(t *testing.T, runtime, kind, ext string) *kernelSession {
	t.Helper()
	_, rt := env.Image(t, runtime)
	argv, err := kernel.Command(kind, rt.WarmCommand)
	if err != nil {
		t.Fatal(err)
	}
	_, ss := openSessionOn(t, runtime)
	return &kernelSession{ss: ss, kind: kind, argv: argv, ext: ext}
}

// cell runs src as the session's next cell on its kernel, with timeout
// and the interrupt's grace.
func (k *kernelSession) cell(t *testing.T, timeout, interrupt time.Duration, src string) call {
	t.Helper()
	k.cells++
	path := fmt.Sprintf("/code/cell-%d%s", k.cells, k.ext)
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root", "LANG=C.UTF-8"}
	var stdout, stderr bytes.Buffer
	o, err := k.ss.RunNext(context.Background(), sandbox.Job{Argv: k.argv, Env: env, Dir: "/tmp", Timeout: timeout, MaxReturnBytes: 1 << 20,
		Files:  []sandbox.File{{Path: path, Data: []byte(src)}},
		Stdout: &stdout, Stderr: &stderr,
		Resident: &sandbox.Resident{Key: k.kind, Argv: k.argv, Env: env, Dir: "/tmp", Request: kernel.Request("/tmp", path, env),
			Interrupt: interrupt}})
	if err != nil {
		t.Fatalf("cell %d %q: %v", k.cells, src, err)
	}
	return call{o, stdout.String(), stderr.String()}
}

// On runsc, as on namespaces (TestSessionPythonKernel there), a session's
// Python kernel keeps its variables from job to job and shows a last bare
// expression; a timeout interrupts a busy cell (130) and keeps the
// kernel, while a cell that ignores the interrupt loses it, killed with
// its own processes only (a background process of an earlier plain job
// lives on); the next cell starts a fresh kernel. A kernel that exits, or
// writes a broken reply, is lost too, and a key beyond the session's
// kernels is refused.
func TestSessionPythonKernel(t *testing.T) {
	k := openKernelSession(t, "python3.13", "python", ".py")
	const long, grace = 30 * time.Second, 2 * time.Second
	if c := k.cell(t, long, grace, "x = 41\nprint('set')"); !c.ResidentStarted || c.ResidentLost || c.ExitCode != 0 || c.stdout != "set\n" || !c.Separated {
		t.Fatalf("first cell: %+v, stdout %q, stderr %q", c.Outcome, c.stdout, c.stderr)
	}
	if c := k.cell(t, long, grace, "x + 1"); c.ResidentStarted || c.ExitCode != 0 || c.stdout != "42\n" {
		t.Fatalf("second cell: %+v, stdout %q, stderr %q", c.Outcome, c.stdout, c.stderr)
	}
	mustRun(t, k.ss, long, `sleep 1000 & echo $! > /tmp/bg.pid`)
	c := k.cell(t, long, grace, `import subprocess
p = subprocess.Popen(["/bin/sleep", "1000"], start_new_session=True)
open("/tmp/kbg.pid", "w").write(str(p.pid))`)
	if c.ExitCode != 0 || c.Left != 1 {
		t.Fatalf("a cell with a background process: %+v, stderr %q", c.Outcome, c.stderr)
	}
	if c := k.cell(t, long, grace, "import os\nos.kill(int(open('/tmp/kbg.pid').read()), 0)\nprint('kbg-alive')"); c.stdout != "kbg-alive\n" {
		t.Errorf("the cell's background process after it: %+v, stdout %q, stderr %q", c.Outcome, c.stdout, c.stderr)
	}

	c = k.cell(t, time.Second, grace, "while True: pass")
	if !c.TimedOut || c.ExitCode != 130 || c.ResidentLost || !c.Separated || c.Ended || !strings.Contains(c.stderr, "KeyboardInterrupt") {
		t.Fatalf("an interrupted cell: %+v, stderr %q", c.Outcome, c.stderr)
	}
	if c := k.cell(t, long, grace, "x"); c.ResidentStarted || c.stdout != "41\n" {
		t.Fatalf("after the interrupt: %+v, stdout %q, stderr %q", c.Outcome, c.stdout, c.stderr)
	}

	c = k.cell(t, time.Second, time.Second, "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: time.sleep(0.05)")
	if !c.TimedOut || !c.ResidentLost || c.ExitCode != 137 || !c.Separated || c.Ended {
		t.Fatalf("a cell that ignores the interrupt: %+v, stderr %q", c.Outcome, c.stderr)
	}
	check := `kill -0 "$(cat /tmp/bg.pid)" && echo bg-alive; kill -0 "$(cat /tmp/kbg.pid)" 2>/dev/null || echo kbg-gone`
	if c := mustRun(t, k.ss, long, check); c.stdout != "bg-alive\nkbg-gone\n" {
		t.Errorf("after the kernel was killed: %+v, stdout %q, stderr %q", c.Outcome, c.stdout, c.stderr)
	}
	if c := k.cell(t, long, grace, "'x' in globals()"); !c.ResidentStarted || c.ResidentLost || c.stdout != "False\n" {
		t.Fatalf("the cell after a lost kernel: %+v, stdout %q, stderr %q", c.Outcome, c.stdout, c.stderr)
	}

	if c := k.cell(t, long, grace, "import os\nos._exit(3)"); !c.ResidentLost || c.ExitCode != 3 || !c.Separated {
		t.Errorf("a kernel that exits: %+v", c.Outcome)
	}
	if c := k.cell(t, long, grace, "import os\nos.write(4, b'\\x05\\x00\\x00\\x00junk!')"); !c.ResidentStarted || !c.ResidentLost || !c.Separated || c.Ended {
		t.Errorf("a broken reply: %+v, stderr %q", c.Outcome, c.stderr)
	}
	if c := k.cell(t, long, grace, "print(6 * 7)"); !c.ResidentStarted || c.ExitCode != 0 || c.stdout != "42\n" {
		t.Errorf("after a broken reply: %+v, stdout %q, stderr %q", c.Outcome, c.stdout, c.stderr)
	}
	// The session keeps four kernels: a fifth key is refused, and the
	// session goes on.
	for i := 1; i < 4; i++ {
		k.kind = fmt.Sprintf("python-%d", i)
		if c := k.cell(t, long, grace, "print('up')"); !c.ResidentStarted || c.stdout != "up\n" {
			t.Errorf("kernel %d: %+v, stdout %q, stderr %q", i, c.Outcome, c.stdout, c.stderr)
		}
	}
	_, err := k.ss.RunNext(context.Background(), sandbox.Job{Argv: k.argv, Timeout: long,
		Resident: &sandbox.Resident{Key: "python-4", Argv: k.argv, Dir: "/tmp", Request: kernel.Request("/tmp", "/code/none.py", nil)}})
	if err == nil || !strings.Contains(err.Error(), "at most 4 interpreters") {
		t.Errorf("a fifth kernel: %v", err)
	}
	if !k.ss.Alive() {
		t.Error("the session is not alive")
	}
}
