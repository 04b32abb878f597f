package kernel

import (
	"strings"
	"testing"
	"time"
)

func TestNodeStatePersists(t *testing.T) {
	k := startKernel(t, "node", 10*time.Second)
	k.ok("var x = 41;\nfunction f(a) { return a + x; }\nconst fs = require('fs');\nlet kept = 'let';").expect(t, "")
	k.ok("x += 1;\nconsole.log(f(0), typeof fs.readFileSync, kept);").expect(t, "42 function let\n")
	k.ok("process.chdir('/');")
	k.ok("console.log(process.cwd())").expect(t, "/\n")
	k.ok("process.env.A = 'cell'; console.log(process.env.A, process.env.B)", "A=1").expect(t, "cell undefined\n")
	k.ok("console.log(process.env.A, process.env.B)", "B=2").expect(t, "cell 2\n")
	k.ok("__filename.endsWith('call-7.js')").expect(t, "true\n")
}

func TestNodeCompletionValue(t *testing.T) {
	k := startKernel(t, "node", 10*time.Second)
	for _, c := range []struct{ src, want string }{
		{"var y = 3;", ""},          // a declaration completes with undefined
		{"y * 2", "6\n"},            // an expression shows its inspection
		{"'a' + 'b'", "'ab'\n"},     // quoted, as the REPL shows strings
		{"undefined", ""},           // undefined shows nothing
		{"null", "null\n"},          // null is a value
		{"console.log('p')", "p\n"}, // console.log's undefined is not shown
		{"({a: [1, 2]})", "{ a: [ 1, 2 ] }\n"},
		{"Promise.resolve(5)", "5\n"}, // a promise is awaited
		{"y = 4", "4\n"},              // an assignment is an expression, as in the REPL
		{"", ""},
	} {
		k.ok(c.src).expect(t, c.want)
	}
}

func TestNodeLetRedeclaration(t *testing.T) {
	k := startKernel(t, "node", 10*time.Second)
	k.ok("let a = 1;")
	c := k.run("let a = 2;")
	if c.Lost || c.Status != 1 || !strings.Contains(c.stderr, "SyntaxError: Identifier 'a' has already been declared") {
		t.Fatalf("status %d lost %v stderr:\n%s", c.Status, c.Lost, c.stderr)
	}
	k.ok("a = 3; a").expect(t, "3\n")
}

func TestNodeExceptions(t *testing.T) {
	k := startKernel(t, "node", 10*time.Second)
	k.ok("function boom() { throw new TypeError('bad'); }\nvar v = 1;")
	c := k.run("v = 2;\nboom();\nv = 3;")
	if c.Lost || c.Status != 1 {
		t.Fatalf("status %d lost %v, want 1", c.Status, c.Lost)
	}
	if !strings.Contains(c.stderr, "TypeError: bad\n    at boom ("+k.dir+"/call-1.js:1:") ||
		!strings.Contains(c.stderr, "call-2.js:2:") {
		t.Errorf("stack:\n%s", c.stderr)
	}
	if strings.Contains(c.stderr, "node:vm") || strings.Contains(c.stderr, "[eval]") {
		t.Errorf("the kernel's frames are in the stack:\n%s", c.stderr)
	}
	k.ok("v").expect(t, "2\n")
	if c := k.run("throw 42"); c.Status != 1 || c.stderr != "Uncaught 42\n" {
		t.Errorf("throw 42: status %d stderr %q", c.Status, c.stderr)
	}
	if c := k.run("function ("); c.Status != 1 || !strings.Contains(c.stderr, "SyntaxError") {
		t.Errorf("syntax error: status %d stderr %q", c.Status, c.stderr)
	}
	if c := k.run("Promise.reject(new Error('no'))"); c.Status != 1 || !strings.Contains(c.stderr, "Error: no") {
		t.Errorf("rejected promise: status %d stderr %q", c.Status, c.stderr)
	}
	// A throw from a callback fails the cell that is running when it comes
	// (same-delay timers fire in the order they were set), and the kernel
	// lives on. One that comes between cells is printed (output between
	// calls) and fails nothing.
	k.ok("var later = () => setTimeout(() => { throw new Error('later'); }, 0); undefined")
	c = k.run("later(); new Promise((r) => setTimeout(r, 0))")
	if c.Status != 1 || !strings.Contains(c.stderr, "Error: later") {
		t.Errorf("left-behind throw: status %d stderr %q", c.Status, c.stderr)
	}
	k.ok("v").expect(t, "2\n")
}

func TestNodeInterrupt(t *testing.T) {
	k := startKernel(t, "node", 30*time.Second)
	k.ok("var n = 0;")
	c := k.runCtx(k.interruptWhen("spinning"), "n++;\nconsole.log('spinning');\nfor (;;);")
	if c.Lost || !c.Interrupted || c.Status != 130 || !strings.Contains(c.stderr, "interrupted by `SIGINT`") {
		t.Fatalf("status %d interrupted %v lost %v (%v) stderr %q", c.Status, c.Interrupted, c.Lost, c.Err, c.stderr)
	}
	// Said once the script has returned and its promise is awaited: a
	// SIGINT that comes as the script ends can be lost in Node's
	// breakOnSigint watchdog (the driver's grace covers that case).
	c = k.runCtx(k.interruptWhen("waiting"), "new Promise(() => { setTimeout(() => console.log('waiting'), 0); })")
	if c.Lost || !c.Interrupted || c.Status != 130 {
		t.Fatalf("await: status %d interrupted %v lost %v (%v) stderr %q", c.Status, c.Interrupted, c.Lost, c.Err, c.stderr)
	}
	if err := k.cmd.Process.Signal(interruptSignal); err != nil {
		t.Fatal(err)
	}
	k.ok("n").expect(t, "1\n")
}

func TestNodeExitEndsTheKernel(t *testing.T) {
	k := startKernel(t, "node", 10*time.Second)
	c := k.run("console.log('bye'); process.exit(5)")
	if !c.Lost || c.stdout != "bye\n" {
		t.Fatalf("status %d lost %v stdout %q, want lost", c.Status, c.Lost, c.stdout)
	}
	if code := k.cmd.ProcessState.ExitCode(); code != 5 {
		t.Errorf("exit code %d", code)
	}
}

func TestNodeChildrenDoNotInheritThePipes(t *testing.T) {
	k := startKernel(t, "node", 10*time.Second)
	k.ok("[3, 4].map((fd) => require('child_process').spawnSync('sh', ['-c', 'test -e /proc/self/fd/' + fd]).status !== 0)").expect(t, "[ true, true ]\n")
}

func TestNodeLargeOutput(t *testing.T) {
	k := startKernel(t, "node", 10*time.Second)
	const n = 8 << 20
	c := k.ok("process.stdout.write('x'.repeat(" + itoa(n) + ")); process.stderr.write('e'.repeat(100000)); 'done'")
	if len(c.stdout) != n+len("'done'\n") || !strings.HasSuffix(c.stdout, "x'done'\n") || len(c.stderr) != 100000 {
		t.Errorf("stdout %d bytes, stderr %d bytes", len(c.stdout), len(c.stderr))
	}
	k.ok("console.log('next')").expect(t, "next\n")
}
