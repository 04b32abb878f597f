package engine

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// newSessionTestEngine is an engine with sessions on over the namespaces
// level (the one that holds sessions), its sweeper left to the test; the
// test fails if anything of its sandboxes is left once it closed.
func newSessionTestEngine(t *testing.T, mutate func(*Config)) *Engine {
	t.Helper()
	testenv.SkipIfShort(t, "runs real sandboxes")
	newTestEngine(t, nil)
	before := nsLevel.Snapshot()
	e := newEngineOn(t, testBackend, func(c *Config) {
		c.Sessions.Policy = execapi.DefaultSessionPolicy()
		c.Sessions.Policy.Enabled = true
		c.Sessions.Sweep = time.Hour
		if mutate != nil {
			mutate(c)
		}
	})
	t.Cleanup(func() {
		e.Close()
		nsLevel.CheckClean(t, before)
	})
	return e
}

// mustExec runs code in a session and fails on an error.
func mustExec(t *testing.T, e *Engine, id, code string) execapi.SessionResult {
	t.Helper()
	res, err := execFake(t, e, "k", id, code)
	if err != nil {
		t.Fatalf("exec %q: %v", code, err)
	}
	return res
}

// A bash session keeps its files, its exported variables and its
// directory from call to call; files written and read between calls are
// the sandbox's own; closing purges it.
func TestSessionBashKeepsFilesVariablesAndDirectory(t *testing.T) {
	e := newSessionTestEngine(t, nil)
	requireRuntime(t, "bash")
	info := openFake(t, e, "k", "bash")
	ref := execapi.SessionRef{ID: info.ID}
	mustExec(t, e, info.ID, "export GREETING=hello; mkdir -p /tmp/d && cd /tmp/d && echo kept > f")
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	if err := e.WriteSessionFile(as("k"), ref, "/root/b", all); err != nil {
		t.Fatal(err)
	}
	res := mustExec(t, e, info.ID, `echo "$GREETING"; pwd; cat f; wc -c < /root/b; echo out > /tmp/out`)
	if want := "hello\n/tmp/d\nkept\n256\n"; res.Stdout != want || res.ExitCode != 0 || res.StatePurged {
		t.Fatalf("second call: %q (exit %d, %s), want %q", res.Stdout, res.ExitCode, res.Note, want)
	}
	got, err := e.ReadSessionFile(as("k"), ref, "/tmp/out")
	if err != nil || string(got) != "out\n" {
		t.Fatalf("read /tmp/out: %q, %v", got, err)
	}
	if got, err := e.ReadSessionFile(as("k"), ref, "/root/b"); err != nil || !bytes.Equal(got, all) {
		t.Fatalf("read /root/b back: %v", err)
	}
	if _, err := e.ReadSessionFile(as("k"), ref, "/tmp/none"); err != execapi.ErrSessionFileNotFound {
		t.Fatalf("a missing file: %v", err)
	}
	end, err := e.CloseSession(as("k"), ref)
	if err != nil || !end.StatePurged || end.Reason != execapi.EndDeleted {
		t.Fatalf("close: %+v, %v", end, err)
	}
	_, err = execFake(t, e, "k", info.ID, "true")
	wantEnded(t, err, execapi.EndDeleted)
}

// A background process lives on between calls, and a call's timeout
// kills that call's processes and no others.
func TestSessionKeepsBackgroundProcessAcrossTimeout(t *testing.T) {
	e := newSessionTestEngine(t, nil)
	requireRuntime(t, "bash")
	info := openFake(t, e, "k", "bash")
	bg := strings.TrimSpace(mustExec(t, e, info.ID, "sleep 1000 >/dev/null 2>&1 & echo $!").Stdout)
	res, err := execFakeTimeout(e, "k", info.ID, "sleep 999 & sleep 998", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != execapi.ExitTimeout || res.Session.Ended != nil {
		t.Fatalf("a call past its timeout: exit %d, ended %+v (%s)", res.ExitCode, res.Session.Ended, res.Note)
	}
	res = mustExec(t, e, info.ID, `kill -0 `+bg+` && echo alive
n=0; for p in /proc/[0-9]*; do c=$(tr '\0' ' ' < $p/cmdline 2>/dev/null); case "$c" in "sleep 99"*) n=$((n+1));; esac; done; echo $n`)
	if res.Stdout != "alive\n0\n" {
		t.Fatalf("after the timeout: %q (%s)", res.Stdout, res.Note)
	}
}

// Memory is the session's across calls: what earlier calls keep counts,
// and the call that crosses the limit is killed (137) and ends the
// session, purged; its owner's next call learns why.
func TestSessionMemoryAcrossCallsEndsIt(t *testing.T) {
	e := newSessionTestEngine(t, nil)
	requireRuntime(t, "bash")
	c, err := e.SessionPolicy().ValidateSession(e.Policy(), execapi.SessionRequest{Runtime: "bash", Limits: execapi.Limits{MemoryMB: 128}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := e.OpenSession(as("k"), c)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, e, info.ID, "head -c 80m /dev/zero > /dev/shm/a")
	res := mustExec(t, e, info.ID, "head -c 80m /dev/zero | tail > /dev/null")
	if res.ExitCode != execapi.ExitKilled || res.Session.Ended == nil || res.Session.Ended.Reason != execapi.EndMemoryLimit || !res.StatePurged {
		t.Fatalf("the call over the session's memory: exit %d, ended %+v, purged %v (%s)", res.ExitCode, res.Session.Ended, res.StatePurged, res.Note)
	}
	if !strings.Contains(res.Note, "The session has ended") || !strings.Contains(res.Note, "memory") {
		t.Errorf("the note of the call that ended the session for memory: %q", res.Note)
	}
	_, err = execFake(t, e, "k", info.ID, "true")
	wantEnded(t, err, execapi.EndMemoryLimit)
}

// The sweeper's idle TTL and lifetime end real sessions and purge them.
func TestSessionExpiryPurges(t *testing.T) {
	e := newSessionTestEngine(t, nil)
	requireRuntime(t, "bash")
	clk := &fakeClock{t: time.Now()}
	e.sessions.mu.Lock()
	e.sessions.now = clk.now
	e.sessions.mu.Unlock()
	idle := openFake(t, e, "k", "bash")
	mustExec(t, e, idle.ID, "sleep 1000 >/dev/null 2>&1 &")
	clk.add(11 * time.Minute)
	e.sessions.sweep()
	_, err := execFake(t, e, "k", idle.ID, "true")
	wantEnded(t, err, execapi.EndIdleTTL)
	var ended *execapi.SessionEndedError
	if !errors.As(err, &ended) || !ended.End.StatePurged {
		t.Fatalf("the idle session's end is not verified purged: %v", err)
	}

	// A session kept busy still ends at its lifetime, purged, with its
	// background process.
	busy := openFake(t, e, "k", "bash")
	mustExec(t, e, busy.ID, "sleep 1000 >/dev/null 2>&1 &")
	// A call every 5 minutes (within the 10-minute idle TTL) for 55
	// minutes, then 6 more: past the hour's lifetime, never idle too long.
	for range 11 {
		clk.add(5 * time.Minute)
		mustExec(t, e, busy.ID, "true")
		e.sessions.sweep()
	}
	clk.add(6 * time.Minute)
	e.sessions.sweep()
	_, err = execFake(t, e, "k", busy.ID, "true")
	wantEnded(t, err, execapi.EndMaxLifetime)
	if !errors.As(err, &ended) || !ended.End.StatePurged {
		t.Fatalf("the busy session's end at its lifetime is not verified purged: %v", err)
	}
}

// Python and Node sessions keep their variables and functions, and show
// the last expression's value. (Needs the kernels in the namespaces
// level's init.)
func TestSessionKeepsInterpreterState(t *testing.T) {
	e := newSessionTestEngine(t, nil)
	for _, c := range []struct{ runtime, first, second, want string }{
		{"python3.13", "def f(x):\n    return x * 2\nv = 21", "f(v)", "42\n"},
		{"node20", "var v = 21; function f(x) { return x * 2 }", "f(v)", "42\n"},
	} {
		t.Run(c.runtime, func(t *testing.T) {
			requireRuntime(t, c.runtime)
			info := openFake(t, e, "k", c.runtime)
			if res := mustExec(t, e, info.ID, c.first); res.ExitCode != 0 || res.Session.Interpreter != execapi.InterpreterStarted {
				t.Fatalf("first call: %+v", res)
			}
			res := mustExec(t, e, info.ID, c.second)
			if res.Stdout != c.want || res.Session.Interpreter != execapi.InterpreterKept {
				t.Fatalf("second call: %q, interpreter %q (%s)", res.Stdout, res.Session.Interpreter, res.Note)
			}
		})
	}
}
