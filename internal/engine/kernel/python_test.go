package kernel

import (
	"strings"
	"testing"
	"time"
)

func TestPythonStatePersists(t *testing.T) {
	k := startKernel(t, "python", 10*time.Second)
	k.ok("x = 41\ndef f(a):\n    return a + x\nimport math\n").expect(t, "")
	k.ok("x += 1\nprint(f(0), math.floor(2.5))").expect(t, "42 2\n")
	// The working directory is the kernel's: a cell's chdir outlives it.
	k.ok("import os\nos.chdir('/')")
	k.ok("print(os.getcwd())").expect(t, "/\n")
	// The environment is the kernel's: what a cell sets stays, and each
	// cell's request variables are applied over it.
	k.ok("os.environ['A'] = 'cell'\nprint(os.environ.get('A'), os.environ.get('B'))", "A=1").expect(t, "cell None\n")
	k.ok("print(os.environ.get('A'), os.environ.get('B'))", "B=2").expect(t, "cell 2\n")
	k.ok("print(__name__, __file__.endswith('call-7.py'))").expect(t, "__main__ True\n")
}

func TestPythonLastExpressionDisplay(t *testing.T) {
	k := startKernel(t, "python", 10*time.Second)
	for _, c := range []struct{ src, want string }{
		{"y = 3", ""},                     // an assignment shows nothing
		{"y * 2", "6\n"},                  // an expression shows its repr
		{"'a' + 'b'", "'ab'\n"},           // repr, not str
		{"None", ""},                      // None shows nothing
		{"print('p')", "p\n"},             // print's None is not shown again
		{"y\ny + 1", "4\n"},               // only the last expression
		{"_", "4\n"},                      // displayhook sets _ as the REPL does
		{"for i in range(2):\n    i", ""}, // a compound statement shows nothing
		{"z = [1]\nz.append(2)\nz", "[1, 2]\n"},
		{"", ""},
		{"# only a comment", ""},
	} {
		k.ok(c.src).expect(t, c.want)
	}
}

func TestPythonExceptions(t *testing.T) {
	k := startKernel(t, "python", 10*time.Second)
	k.ok("def boom():\n    raise ValueError('bad')\nv = 1")
	c := k.run("v = 2\nboom()\nv = 3")
	if c.Lost || c.Status != 1 {
		t.Fatalf("status %d lost %v, want 1", c.Status, c.Lost)
	}
	if !strings.HasPrefix(c.stderr, "Traceback (most recent call last):\n  File \""+k.dir+"/call-2.py\", line 2") ||
		!strings.Contains(c.stderr, "call-1.py\", line 2, in boom\n    raise ValueError('bad')") ||
		!strings.HasSuffix(c.stderr, "ValueError: bad\n") {
		t.Errorf("traceback:\n%s", c.stderr)
	}
	// The kernel's own frames are cut.
	if strings.Contains(c.stderr, "<string>") || strings.Contains(c.stderr, "_kernel") {
		t.Errorf("the kernel's frames are in the traceback:\n%s", c.stderr)
	}
	// What ran before the exception stays; the kernel lives on.
	k.ok("v").expect(t, "2\n")
	c = k.run("def (:\n")
	if c.Status != 1 || !strings.Contains(c.stderr, "SyntaxError") || strings.Contains(c.stderr, "Traceback") {
		t.Errorf("syntax error: status %d, stderr:\n%s", c.Status, c.stderr)
	}
	c = k.run("class R:\n    def __repr__(self):\n        raise KeyError('r')\nR()")
	if c.Status != 1 || !strings.HasSuffix(c.stderr, "KeyError: 'r'\n") {
		t.Errorf("failing repr: status %d, stderr:\n%s", c.Status, c.stderr)
	}
}

func TestPythonSystemExitEndsTheCell(t *testing.T) {
	k := startKernel(t, "python", 10*time.Second)
	k.ok("kept = 'yes'")
	for _, c := range []struct {
		src    string
		status int
		stderr string
	}{
		{"import sys\nsys.exit(3)\nkept = 'no'", 3, ""},
		{"raise SystemExit", 0, ""},
		{"exit(300)", 300 & 0xFF, ""},
		{"import sys\nsys.exit('why')", 1, "why\n"},
	} {
		got := k.run(c.src)
		if got.Lost || got.Status != c.status || got.stderr != c.stderr {
			t.Errorf("%q: status %d lost %v stderr %q, want %d %q", c.src, got.Status, got.Lost, got.stderr, c.status, c.stderr)
		}
	}
	k.ok("kept").expect(t, "'yes'\n")
}

func TestPythonInterrupt(t *testing.T) {
	k := startKernel(t, "python", 30*time.Second)
	k.ok("n = 0")
	c := k.runCtx(k.interruptWhen("running"), "import time\nn += 1\nprint('running', flush=True)\nwhile True:\n    time.sleep(0.01)")
	if c.Lost || !c.Interrupted || c.Status != 130 {
		t.Fatalf("status %d interrupted %v lost %v (%v), want 130", c.Status, c.Interrupted, c.Lost, c.Err)
	}
	if !strings.HasSuffix(c.stderr, "KeyboardInterrupt\n") {
		t.Errorf("stderr:\n%s", c.stderr)
	}
	// The kernel lives on with the cell's work kept, and an interrupt that
	// comes between cells is ignored.
	if err := k.cmd.Process.Signal(interruptSignal); err != nil {
		t.Fatal(err)
	}
	k.ok("print(n)").expect(t, "1\n")
}

func TestPythonInterruptIgnoredLosesTheKernel(t *testing.T) {
	k := startKernel(t, "python", 100*time.Millisecond)
	c := k.runCtx(k.interruptWhen("ignoring"), "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('ignoring', flush=True)\ntime.sleep(600)")
	if !c.Lost || !c.Interrupted {
		t.Fatalf("status %d interrupted %v lost %v, want lost", c.Status, c.Interrupted, c.Lost)
	}
	if again := k.run("1"); !again.Lost {
		t.Errorf("a lost kernel's driver ran another cell")
	}
}

func TestPythonKernelEnds(t *testing.T) {
	k := startKernel(t, "python", 10*time.Second)
	c := k.run("import os\nprint('bye', flush=True)\nos._exit(7)")
	if !c.Lost || c.stdout != "bye\n" {
		t.Fatalf("status %d lost %v stdout %q, want lost", c.Status, c.Lost, c.stdout)
	}
	if code := k.cmd.ProcessState.ExitCode(); code != 7 && code != -1 {
		t.Errorf("exit code %d", code)
	}
}

// User code runs in the kernel's process and can write its reply pipe: a
// reply that breaks the frame loses the kernel instead of being believed.
func TestPythonForgedReply(t *testing.T) {
	k := startKernel(t, "python", 10*time.Second)
	c := k.run("import os\nos.write(4, b'\\xff\\xff\\xff\\x7f')\nimport time\ntime.sleep(600)")
	if !c.Lost || !strings.Contains(c.Err.Error(), "malformed") {
		t.Fatalf("status %d lost %v (%v), want lost on a malformed reply", c.Status, c.Lost, c.Err)
	}
}

// A child of a cell gets neither of the kernel's pipes.
func TestPythonChildrenDoNotInheritThePipes(t *testing.T) {
	k := startKernel(t, "python", 10*time.Second)
	k.ok("import os\nfor fd in (3, 4):\n    print(fd, os.system('test -e /proc/self/fd/%d' % fd) != 0)").expect(t, "3 True\n4 True\n")
}

func TestPythonLargeOutput(t *testing.T) {
	k := startKernel(t, "python", 10*time.Second)
	const n = 8 << 20
	c := k.ok("import sys\nsys.stdout.write('x' * " + itoa(n) + ")\nsys.stderr.write('e' * 100000)\n'done'")
	if len(c.stdout) != n+len("'done'\n") || !strings.HasSuffix(c.stdout, "x'done'\n") || len(c.stderr) != 100000 {
		t.Errorf("stdout %d bytes, stderr %d bytes", len(c.stdout), len(c.stderr))
	}
	k.ok("print('next')").expect(t, "next\n")
}
