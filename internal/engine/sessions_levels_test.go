package engine

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// newLevelSessionEngine is newSessionTestEngine on the isolation level
// named level: sessions on, its sweeper left to the test, nothing of its
// sandboxes left once it closed.
func newLevelSessionEngine(t *testing.T, level string) *Engine {
	t.Helper()
	testenv.SkipIfShort(t, "runs real sandboxes")
	newTestEngine(t, nil) // the store
	l := levelNamed(level)
	backend := l.Backend(t) // what the backend itself holds is not the sessions'
	before := l.Snapshot()
	e := newEngineOn(t, backend, func(c *Config) {
		c.Sessions.Policy = execapi.DefaultSessionPolicy()
		c.Sessions.Policy.Enabled = true
		c.Sessions.Sweep = time.Hour
	})
	levelsByEngine.Store(e, l)
	t.Cleanup(func() {
		e.Close()
		l.CheckClean(t, before)
	})
	return e
}

// closePurged closes session id and fails unless its teardown was
// verified.
func closePurged(t *testing.T, e *Engine, id string) {
	t.Helper()
	end, err := e.CloseSession(as("k"), execapi.SessionRef{ID: id})
	if err != nil {
		t.Fatalf("close %s: %v", id, err)
	}
	if !end.StatePurged {
		t.Errorf("close %s: state not purged", id)
	}
}

// On gVisor a Python session keeps its interpreter's variables and its
// files from call to call (the Go init's resident kernel), and closing it
// purges it; the closed session is gone.
func TestSessionGVisorKeepsState(t *testing.T) {
	e := newLevelSessionEngine(t, "gvisor")
	requireRuntime(t, "python3.13")
	info := openFake(t, e, "k", "python3.13")
	if res := mustExec(t, e, info.ID, "v = 21\nopen('/tmp/kept', 'w').write('file')"); res.ExitCode != 0 || res.Session.Interpreter != execapi.InterpreterStarted {
		t.Fatalf("first call: %+v", res)
	}
	res := mustExec(t, e, info.ID, "print(v * 2, open('/tmp/kept').read())")
	if res.Stdout != "42 file\n" || res.Session.Interpreter != execapi.InterpreterKept {
		t.Fatalf("second call: %q, interpreter %q (%s)", res.Stdout, res.Session.Interpreter, res.Note)
	}
	closePurged(t, e, info.ID)
	if _, err := execFake(t, e, "k", info.ID, "v"); err == nil {
		t.Error("a closed session ran a call")
	}
}

// The fork-with-memory case, on the microVM level: a Python
// session defines a variable and starts a background process, and its
// fork has both (the interpreter's memory copied: the same Popen object
// sees its child alive, and the child goes on writing); from then on a
// change in either is not in the other. Both close purged, and nothing of
// either machine is left.
func TestSessionMicroVMForkWithMemory(t *testing.T) {
	e := newLevelSessionEngine(t, "microvm")
	requireRuntime(t, "python3.13")
	parent := openFake(t, e, "k", "python3.13")
	mustExec(t, e, parent.ID, `import subprocess
v = 41
p = subprocess.Popen(["/bin/sh", "-c", "i=0; while :; do i=$((i+1)); echo $i > /tmp/tick; sleep 0.05; done"])
def f():
    raise ValueError("from the parent's cell")`)
	child, err := e.ForkSession(as("k"), execapi.SessionRef{ID: parent.ID})
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	if child.ID == parent.ID {
		t.Fatal("the fork has its parent's id")
	}
	// The fork's calls go on numbering its cells after the parent's: a
	// traceback through a function of the parent's cell shows that cell's
	// line, not one of a fork's cell written over it.
	if res := mustExec(t, e, child.ID, "f()"); res.ExitCode != 1 || !strings.Contains(res.Stderr, `raise ValueError("from the parent's cell")`) {
		t.Errorf("a traceback through the parent's cell: %q", res.Stderr)
	}
	// The child's loop goes on in the copy: its counter moves (a bounded
	// wait for the next tick).
	const ticks = `import time
def moved():
    first = open('/tmp/tick').read()
    for _ in range(200):
        time.sleep(0.05)
        if open('/tmp/tick').read() != first:
            return True
    return False
`
	res := mustExec(t, e, child.ID, ticks+"print(v, p.poll() is None, moved())")
	if res.ExitCode != 0 || res.Stdout != "41 True True\n" || res.Session.Interpreter != execapi.InterpreterKept {
		t.Fatalf("the fork's first call: %+v", res)
	}
	mustExec(t, e, parent.ID, "v = 1\nopen('/tmp/parent', 'w').write('p')")
	mustExec(t, e, child.ID, "v = 2\nopen('/tmp/child', 'w').write('c')")
	const look = "import os\nprint(v, os.path.exists('/tmp/parent'), os.path.exists('/tmp/child'))"
	if res := mustExec(t, e, parent.ID, look); res.Stdout != "1 True False\n" {
		t.Errorf("the parent after both changed: %q (%s)", res.Stdout, res.Stderr)
	}
	if res := mustExec(t, e, child.ID, ticks+look+"\nprint(p.poll() is None, moved())"); res.Stdout != "2 False True\nTrue True\n" {
		t.Errorf("the fork after both changed: %q (%s)", res.Stdout, res.Stderr)
	}
	// The fork knows its kernel as its parent did: one lost there and
	// started again is a restart, not a first start.
	if res, err := execFake(t, e, "k", child.ID, "import os\nos._exit(3)"); err != nil || res.ExitCode != 3 {
		t.Errorf("a kernel that exits in the fork: %+v, %v", res, err)
	}
	if res := mustExec(t, e, child.ID, "print('again')"); res.Stdout != "again\n" || res.Session.Interpreter != execapi.InterpreterRestarted {
		t.Errorf("the fork's next call: %q, interpreter %q", res.Stdout, res.Session.Interpreter)
	}
	closePurged(t, e, child.ID)
	closePurged(t, e, parent.ID)
	for _, id := range []string{parent.ID, child.ID} {
		if _, err := execFake(t, e, "k", id, "v"); err == nil {
			t.Errorf("closed session %s ran a call", id)
		}
	}
}

// A fork numbers its calls on from its parent's: its first call's file
// does not overwrite the copy of the parent's first cell, whose lines a
// function defined there still shows in a traceback.
func TestSessionForkNumbersCallsOn(t *testing.T) {
	b := &sessionBackend{fork: true}
	e, _ := newSessionEngine(t, b, nil)
	parent := openFake(t, e, "k", "bash")
	mustExec(t, e, parent.ID, "echo parent-1")
	child, err := e.ForkSession(as("k"), execapi.SessionRef{ID: parent.ID})
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, e, child.ID, "echo child-1")
	// The fork is the sandbox whose files hold the child's cell.
	b.mu.Lock()
	var files map[string][]byte
	for s := range b.live {
		s.mu.Lock()
		for _, data := range s.files {
			if string(data) == "echo child-1" {
				files = maps.Clone(s.files)
			}
		}
		s.mu.Unlock()
	}
	b.mu.Unlock()
	cells := map[string]string{}
	for path, data := range files {
		if rest, ok := strings.CutPrefix(path, "/code/call-"); ok {
			n, _, _ := strings.Cut(rest, "-")
			cells[n] = string(data)
		}
	}
	if cells["1"] != "echo parent-1" || cells["2"] != "echo child-1" {
		t.Errorf("the fork's cells by number: %q, want the parent's first as 1 and the fork's first as 2", cells)
	}
}
