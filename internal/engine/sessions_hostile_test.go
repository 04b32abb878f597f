//go:build hostile

package engine

// The hostile suite's session cases: user code in a session attacks
// another session, its own kernel and keeper, the engine's file
// operations and the fork's copy, and the session ends cleanly where it
// must, leaving nothing (newSessionTestEngine checks the level is clean).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// execAs runs code in session id as caller, failing on an error.
func execAs(t *testing.T, e *Engine, caller, id, code string) execapi.SessionResult {
	t.Helper()
	res, err := execFake(t, e, caller, id, code)
	if err != nil {
		t.Fatalf("exec %q: %v", code, err)
	}
	return res
}

// sessionPlant is Python run in a session to leave marks a neighbour
// must not see: a file, a background process, an abstract socket, a SysV
// shared memory segment and an exported variable; it prints its
// namespaces.
const sessionPlant = `import ctypes, os, socket, subprocess
open("/tmp/mark-NAME", "w").write("NAME")
keep = subprocess.Popen(["sleeper-NAME", "1001"], executable="/bin/sleep")
lsn = socket.socket(socket.AF_UNIX)
lsn.bind("\0scratchrun-NAME")
lsn.listen()
libc = ctypes.CDLL(None, use_errno=True)
assert libc.shmget(0x5c7a00 + ord("NAME"), 4096, 0o1000 | 0o600) >= 0
os.environ["MARK"] = "NAME"
print(" ".join(os.readlink("/proc/self/ns/" + n) for n in ("pid", "mnt", "net", "ipc", "cgroup", "uts")))
`

// sessionProbe is Python run in a session to look for a neighbour's
// marks; it prints what it found, nothing when it found none.
const sessionProbe = `import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
found = []
if os.path.exists("/tmp/mark-NAME"): found.append("file")
for p in os.listdir("/proc"):
    try:
        if p.isdigit() and open("/proc/%s/cmdline" % p, "rb").read() == b"sleeper-NAME\x001001\x00":
            found.append("process " + p)
    except OSError: pass
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\0scratchrun-NAME"); found.append("socket")
except OSError: pass
if libc.shmget(0x5c7a00 + ord("NAME"), 0, 0) >= 0: found.append("shm")
if os.environ.get("MARK") == "NAME": found.append("env")
print(" ".join(found))
`

// Two sessions, of one caller and of two, see nothing of each other:
// files, processes, sockets, IPC, environment, namespaces, output; a kill
// of every process it can name (kill -1) in one leaves the other be.
func TestHostileSessionsSeeNothingOfEachOther(t *testing.T) {
	e := newSessionTestEngine(t, nil)
	requireRuntime(t, "python3.13")
	for _, pair := range [][2]string{{"a", "a"}, {"a", "b"}} {
		t.Run(pair[0]+"-"+pair[1], func(t *testing.T) {
			x := openFake(t, e, pair[0], "python3.13")
			y := openFake(t, e, pair[1], "python3.13")
			nsX := execAs(t, e, pair[0], x.ID, strings.ReplaceAll(sessionPlant, "NAME", "x"))
			nsY := execAs(t, e, pair[1], y.ID, strings.ReplaceAll(sessionPlant, "NAME", "y"))
			if nsX.ExitCode != 0 || nsY.ExitCode != 0 {
				t.Fatalf("plant: %+v / %+v", nsX.Result, nsY.Result)
			}
			for _, a := range strings.Fields(nsX.Stdout) {
				if strings.Contains(nsY.Stdout, a) {
					t.Errorf("the two sessions share the namespace %s", a)
				}
			}
			// Each sees its own marks (the probe works) and none of the
			// other's.
			if got := execAs(t, e, pair[0], x.ID, strings.ReplaceAll(sessionProbe, "NAME", "x")).Stdout; got != "file process 4 socket shm env\n" {
				t.Errorf("x's probe of its own marks: %q", got)
			}
			if got := execAs(t, e, pair[1], y.ID, strings.ReplaceAll(sessionProbe, "NAME", "x")); got.Stdout != "\n" {
				t.Errorf("y sees x's %q (%s)", got.Stdout, got.Stderr)
			}
			// x floods its stdout from the background; y's output has
			// none of it.
			execAs(t, e, pair[0], x.ID, `import subprocess
flood = subprocess.Popen(["sh", "-c", "while :; do echo FLOODX; done"])`)
			if _, err := e.ReadSessionFile(as(pair[1]), execapi.SessionRef{ID: y.ID}, "/tmp/mark-x"); err != execapi.ErrSessionFileNotFound {
				t.Errorf("y reads x's file: %v", err)
			}
			// y kills every process it can name: its own keeper among
			// them, which may end y's session (cleanly); x's are not among
			// them.
			kill := execAs(t, e, pair[1], y.ID, `import os, signal
os.kill(-1, signal.SIGKILL)
print("after")`)
			if strings.Contains(kill.Stdout+kill.Stderr, "FLOODX") {
				t.Errorf("y's call has x's output")
			}
			if end := kill.Session.Ended; end != nil && !kill.StatePurged {
				t.Errorf("y's kill -1 ended its session unclean: %+v", end)
			}
			res := execAs(t, e, pair[0], x.ID, `flood.kill(); flood.wait()
print(keep.poll(), open("/tmp/mark-x").read())`)
			if !strings.HasSuffix(res.Stdout, "None x\n") || res.Session.Ended != nil {
				t.Errorf("x after y's kill -1: %q, ended %+v (%s)", res.Stdout, res.Session.Ended, res.Note)
			}
			if pair[0] != pair[1] {
				if _, err := execFake(t, e, pair[1], x.ID, "print(1)"); err != execapi.ErrSessionNotFound {
					t.Errorf("b runs in a's session: %v", err)
				}
				if _, err := e.ReadSessionFile(as(pair[1]), execapi.SessionRef{ID: x.ID}, "/tmp/mark-x"); err != execapi.ErrSessionNotFound {
					t.Errorf("b reads a's session's file: %v", err)
				}
			}
			for _, c := range []struct{ caller, id string }{{pair[0], x.ID}, {pair[1], y.ID}} {
				var ended *execapi.SessionEndedError
				if _, err := e.CloseSession(as(c.caller), execapi.SessionRef{ID: c.id}); err != nil && !errors.As(err, &ended) {
					t.Error(err)
				}
			}
		})
	}
}

// frame is a Python expression of a kernel reply frame of body.
func frame(body string) string {
	return fmt.Sprintf(`len(%[1]s).to_bytes(4, "little") + %[1]s`, body)
}

// User code that writes its kernel's reply pipe, closes or replaces its
// pipes, or kills its kernel, its keeper or init loses (at most) that
// kernel: the session goes on with a new one, and keeps its files. A
// killed keeper may end the session instead, cleanly: at the attack's
// call, or at the next one when the kernel's reply reached init before
// the keeper's death did (a SIGKILL is delivered when its target next
// runs).
func TestHostileSessionKernelAttacks(t *testing.T) {
	e := newSessionTestEngine(t, nil)
	requireRuntime(t, "python3.13")
	// forged marks the case that leaves the kernel a reply ahead of init:
	// each call may then end at the reply of the cell before it, until
	// init catches a reply out of turn between calls, which is timing.
	forged := "forged reply"
	keeper, everything := "kill its keeper", "kill everything"
	for _, c := range []struct{ name, code string }{
		{forged, "import os, time\nos.write(4, " + frame(`b"exit=7\0"`) + ")\ntime.sleep(0.3)\nprint('late')"},
		{"forged replies", "import os\nfor _ in range(100): os.write(4, " + frame(`b"exit=0\0"`) + ")"},
		{"garbage reply", `import os; os.write(4, b"\xff\xff\xff\xff" + b"x" * 4096)`},
		{"half a reply", `import os, time; os.write(4, b"\x09\x00"); time.sleep(0.2)`},
		{"close fds 3 and 4", `import os; os.close(3); os.close(4)`},
		{"dup2 over fds 3 and 4", `import os; os.dup2(1, 4); os.dup2(0, 3)`},
		{"read its own request pipe", `import os, fcntl; fcntl.fcntl(3, fcntl.F_SETFL, os.O_NONBLOCK)
try: os.read(3, 1 << 20)
except BlockingIOError: pass`},
		{"kill itself", `import os; os.kill(os.getpid(), 9)`},
		{keeper, `import os; os.kill(os.getppid(), 9)`},
		{everything, `import os; os.kill(-1, 9)`},
		{"signal init", `import os, signal
for s in (signal.SIGKILL, signal.SIGTERM, signal.SIGSTOP): os.kill(1, s)`},
		{"exit", `raise SystemExit(3)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			info := openFake(t, e, "k", "python3.13")
			ref := execapi.SessionRef{ID: info.ID}
			defer e.CloseSession(as("k"), ref)
			mustExec(t, e, info.ID, `open("/tmp/kept", "w").write("kept")`)
			res, err := execFake(t, e, "k", info.ID, c.code)
			if err != nil {
				t.Fatalf("the attack: %v", err)
			}
			if res.Session.Ended != nil {
				// Ending is allowed only with a reason and verified purged.
				if !res.StatePurged || res.Session.Ended.Reason == "" {
					t.Fatalf("the session ended unclean: %+v (%s)", res.Session.Ended, res.Note)
				}
				_, err := execFake(t, e, "k", info.ID, "print(1)")
				wantEnded(t, err, res.Session.Ended.Reason)
				return
			}
			t.Logf("the attack: exit %d, interpreter %s (%s)", res.ExitCode, res.Session.Interpreter, res.Note)
			if res.ExitCode == execapi.ExitKilled && !strings.Contains(res.Note, "The interpreter was lost in this call") {
				t.Errorf("a call that lost its interpreter does not say so: %q", res.Note)
			}
			// The kernel is user code's own process: what it was made to
			// say (a forged reply, a broken pipe) may misreport the calls
			// after it, until init finds it out of turn and replaces it.
			// That is the session's own business; the calls go on.
			var after execapi.SessionResult
			for i := 0; i < 5 && (after.Stdout != "2 kept\n" || after.ExitCode != 0); i++ {
				after = mustExec(t, e, info.ID, `print(1 + 1, open("/tmp/kept").read())`)
				if end := after.Session.Ended; end != nil && i == 0 && (c.name == keeper || c.name == everything) &&
					end.StatePurged && end.Reason != "" && strings.Contains(after.Note, "keeper process was killed") {
					_, err := execFake(t, e, "k", info.ID, "print(1)")
					wantEnded(t, err, end.Reason)
					return
				}
				if after.Session.Ended != nil {
					t.Fatalf("call %d after the attack ended the session: %+v (%s)", i, after.Session.Ended, after.Note)
				}
				t.Logf("call %d after the attack: %q exit %d, interpreter %s", i, after.Stdout, after.ExitCode, after.Session.Interpreter)
			}
			if (after.Stdout != "2 kept\n" || after.ExitCode != 0) && c.name != forged {
				t.Fatalf("the session did not recover: %q exit %d (%s; %s)", after.Stdout, after.ExitCode, after.Stderr, after.Note)
			}
		})
	}
}

// A cell that ignores SIGINT and never ends is killed once its timeout
// and the interrupt's grace passed; the session goes on with a new
// kernel. Timeouts here are short, the bound on the whole call generous
// (a loaded machine), far below a hang's.
func TestHostileSessionKernelIgnoresInterrupt(t *testing.T) {
	const grace = 300 * time.Millisecond
	e := newSessionTestEngine(t, func(c *Config) { c.Sessions.Interrupt = grace })
	requireRuntime(t, "python3.13")
	info := openFake(t, e, "k", "python3.13")
	mustExec(t, e, info.ID, "v = 1")
	for _, code := range []string{
		"import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass",
		"import signal, subprocess\nsignal.signal(signal.SIGINT, lambda *a: None)\nsubprocess.Popen(['sh', '-c', 'trap \"\" INT; sleep 1000'])\nwhile True:\n    try:\n        pass\n    except BaseException: pass",
	} {
		start := time.Now()
		res, err := execFakeTimeout(e, "k", info.ID, code, 1000)
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != execapi.ExitTimeout || res.Session.Ended != nil {
			t.Fatalf("a cell that ignores SIGINT: exit %d, ended %+v (%s)", res.ExitCode, res.Session.Ended, res.Note)
		}
		if !strings.Contains(res.Note, "The interpreter was lost in this call") {
			t.Errorf("the call does not say its interpreter is gone: %q", res.Note)
		}
		if took > time.Second+grace+20*time.Second {
			t.Errorf("the call took %v", took)
		}
		after := mustExec(t, e, info.ID, `print("v" in globals())
import os
print(sum(1 for p in os.listdir("/proc") if p.isdigit() and b"1000" in open("/proc/%s/cmdline" % p, "rb").read()))`)
		if after.Stdout != "False\n0\n" || after.Session.Interpreter != execapi.InterpreterRestarted {
			t.Fatalf("after the killed cell: %q, interpreter %q (%s)", after.Stdout, after.Session.Interpreter, after.Note)
		}
		mustExec(t, e, info.ID, "v = 1")
	}
}

// sessionSandbox is the id of open session id's sandbox.
func sessionSandbox(e *Engine, id string) string {
	s, err := e.sessions.lookup(as("k"), id, true)
	if err != nil {
		return ""
	}
	return s.l.sb.ID()
}

// A session's sandbox is its own and never reused: a session opened
// after another ended has a new sandbox, none of the old one's files or
// processes; two open at once have different namespaces.
func TestHostileSessionSandboxNotReused(t *testing.T) {
	e := newSessionTestEngine(t, nil)
	requireRuntime(t, "bash")
	const look = `readlink /proc/self/ns/pid /proc/self/ns/cgroup /proc/self/ns/mnt | tr '\n' ' '; echo
ls /tmp/mark 2>/dev/null; for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline; echo; done | grep -c '^sleep 1002 $' || true`
	first := openFake(t, e, "k", "bash")
	mustExec(t, e, first.ID, "echo m > /tmp/mark; sleep 1002 >/dev/null 2>&1 &")
	a := mustExec(t, e, first.ID, look).Stdout
	sbA := sessionSandbox(e, first.ID)
	second := openFake(t, e, "k", "bash")
	b := mustExec(t, e, second.ID, look).Stdout
	if strings.Fields(a)[0] == strings.Fields(b)[0] || strings.Fields(a)[2] == strings.Fields(b)[2] {
		t.Errorf("two open sessions share namespaces: %q / %q", a, b)
	}
	if _, err := e.CloseSession(as("k"), execapi.SessionRef{ID: first.ID}); err != nil {
		t.Fatal(err)
	}
	third := openFake(t, e, "k", "bash")
	c := mustExec(t, e, third.ID, look).Stdout
	if sb := sessionSandbox(e, third.ID); sb == sbA {
		t.Errorf("a new session got the ended one's sandbox %s", sb)
	}
	for _, got := range []string{b, c} {
		if lines := strings.Split(strings.TrimSpace(got), "\n"); len(lines) != 2 || lines[1] != "0" {
			t.Errorf("a new session has the old one's files or processes: %q", got)
		}
	}
}

// Processes that detach every way they can (setsid, double forks, nohup,
// a new process group, a kernel's child) do not outlive their session.
func TestHostileSessionProcessesDoNotOutliveIt(t *testing.T) {
	for _, runtime := range []string{"bash", "python3.13"} {
		t.Run(runtime, func(t *testing.T) {
			e := newSessionTestEngine(t, nil)
			requireRuntime(t, runtime)
			before := nsLevel.Snapshot()
			info := openFake(t, e, "k", runtime)
			code := `setsid sh -c 'sleep 1003 & sleep 1004' >/dev/null 2>&1 < /dev/null &
(nohup sleep 1005 >/dev/null 2>&1 &)
(trap '' TERM HUP INT; exec sleep 1006) >/dev/null 2>&1 &
sh -c 'kill -STOP $$' >/dev/null 2>&1 &`
			if runtime != "bash" {
				code = "import subprocess\nsubprocess.Popen(['sh', '-c', " + fmt.Sprintf("%q", code) + "], start_new_session=True).wait()"
			}
			mustExec(t, e, info.ID, code)
			if _, err := e.CloseSession(as("k"), execapi.SessionRef{ID: info.ID}); err != nil {
				t.Fatal(err)
			}
			nsLevel.CheckClean(t, before)
		})
	}
}

// User code that floods its stdout between calls (and during one) is
// cut at the output limit, counted, and does not stall the session.
func TestHostileSessionFloodsOutput(t *testing.T) {
	e := newSessionTestEngine(t, func(c *Config) { c.OutputLimitBytes = 64 << 10 })
	requireRuntime(t, "bash")
	info := openFake(t, e, "k", "bash")
	bg := strings.TrimSpace(mustExec(t, e, info.ID, "yes flood & echo $!").Stdout)
	for range 3 {
		res := mustExec(t, e, info.ID, "head -c 1000000 /dev/zero | tr '\\0' x; echo")
		if len(res.Stdout) > 64<<10 || len(res.Facts.OutputCut) == 0 || res.Session.Ended != nil {
			t.Fatalf("a flooded call: %d bytes, cut %v, ended %+v (%s)", len(res.Stdout), res.Facts.OutputCut, res.Session.Ended, res.Note)
		}
	}
	// (What it wrote between calls is counted, not kept: hostside's
	// tests count it; how much falls between two calls is timing.)
	mustExec(t, e, info.ID, "kill "+bg)
	if res := mustExec(t, e, info.ID, "echo done"); res.Stdout != "done\n" {
		t.Errorf("the call after the flood: %q", res.Stdout)
	}
}

// What user code plants for the file operations is refused where it
// would lead out: links (absolute, of "..", through /proc's magic links),
// fifos, devices, pseudo-files and a link swapped in during a write.
// Nothing on the host is read or written; the session lives on.
func TestHostileSessionFileOpsOfPlantedFiles(t *testing.T) {
	e := newSessionTestEngine(t, nil)
	requireRuntime(t, "bash")
	secretPath, secret := hostSecretFile(t)
	info := openFake(t, e, "k", "bash")
	ref := execapi.SessionRef{ID: info.ID}
	up := strings.Repeat("../", 20)
	mustExec(t, e, info.ID, fmt.Sprintf(`set -e
ln -s %[1]s /tmp/abs; ln -s %[2]s%[1]s /code/up; ln -s /proc/1/root%[1]s /tmp/magic
ln -s /proc/self/root /tmp/selfroot; ln -s /proc/1/fd /tmp/initfds; mkfifo /tmp/fifo; ln -s /dev/zero /tmp/zero
mkdir -p /tmp/d; ln -s /proc/1/root/tmp /tmp/dirmagic`, secretPath, up))
	for _, p := range []string{secretPath, "/tmp/abs", "/code/up", "/tmp/magic", "/tmp/selfroot" + secretPath,
		"/proc/self/root" + secretPath, "/proc/1/root" + secretPath, "/tmp/initfds/3", "/proc/1/environ",
		"/tmp/fifo", "/tmp/zero", "/dev/zero", "/code/.." + secretPath, "/proc/self/cwd/../../.." + secretPath} {
		ctx, cancel := context.WithTimeout(as("k"), time.Minute)
		got, err := e.ReadSessionFile(ctx, ref, p)
		cancel()
		if err == nil || string(got) == secret {
			t.Errorf("read %s: %d bytes, %v", p, len(got), err)
		}
	}
	for _, p := range []string{"/tmp/abs", "/code/up", "/tmp/magic", "/tmp/fifo", "/tmp/zero", "/tmp/dirmagic/x",
		"/tmp/selfroot/tmp/x", "/proc/self/root/tmp/x", "/proc/sys/kernel/hostname", "/proc/1/root" + secretPath} {
		ctx, cancel := context.WithTimeout(as("k"), time.Minute)
		err := e.WriteSessionFile(ctx, ref, p, []byte("planted"))
		cancel()
		if err == nil {
			t.Errorf("write %s: no error", p)
		}
	}
	if b, err := os.ReadFile(secretPath); err != nil || string(b) != secret {
		t.Errorf("the host's file changed: %q, %v", b, err)
	}
	// A writer between a file, a link out and a fifo while the engine
	// writes and reads that path: each operation is refused or lands in a
	// regular file, never through the link, never hangs.
	mustExec(t, e, info.ID, `echo orig > /tmp/target; sha=$(sha256sum /etc/passwd)
(while :; do ln -sfn /etc/passwd /tmp/r.l; mv -fT /tmp/r.l /tmp/r; rm -f /tmp/r.f; mkfifo /tmp/r.f; mv -fT /tmp/r.f /tmp/r; echo x > /tmp/r.x; mv -fT /tmp/r.x /tmp/r; done) >/dev/null 2>&1 &
echo $! > /tmp/racer; echo "$sha" > /tmp/sha`)
	for i := range 100 {
		ctx, cancel := context.WithTimeout(as("k"), time.Minute)
		if i%2 == 0 {
			_ = e.WriteSessionFile(ctx, ref, "/tmp/r", []byte("planted\n"))
		} else if got, err := e.ReadSessionFile(ctx, ref, "/tmp/r"); err == nil && string(got) != "x\n" && string(got) != "planted\n" && !strings.HasPrefix(string(got), "root:") {
			// The link is followed inside the sandbox only: its own
			// /etc/passwd is what it may read anyway.
			t.Errorf("read the racing path: %q", got)
		}
		if ctx.Err() != nil {
			t.Fatalf("a file operation hung on the racing path")
		}
		cancel()
	}
	res := mustExec(t, e, info.ID, `kill $(cat /tmp/racer); [ "$(sha256sum /etc/passwd)" = "$(cat /tmp/sha)" ] && echo same`)
	if res.Stdout != "same\n" {
		t.Errorf("a write went through the swapped-in link: %q %q", res.Stdout, res.Stderr)
	}
}

// What user code leaves for the fork's copy is contained: links stay
// links, fifos and sockets are not copied, hard links count each time,
// trees that do not fit fail the fork (the parent lives on, nothing
// left), and a writer racing the copy changes none of that.
func TestHostileSessionForkOfPlantedFiles(t *testing.T) {
	e := newSessionTestEngine(t, func(c *Config) { c.TmpBytes, c.WritableBytes = 8<<20, 16<<20 })
	requireRuntime(t, "bash")
	secretPath, secret := hostSecretFile(t)
	info := openFake(t, e, "k", "bash")
	ref := execapi.SessionRef{ID: info.ID}
	mustExec(t, e, info.ID, fmt.Sprintf(`set -e
ln -s /proc/self/root%[1]s /code/magic; ln -s %[2]s%[1]s /code/up; ln -s /code/../../etc /code/etc
mkfifo /code/fifo; python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("/tmp/sock")' 2>/dev/null || true
echo hl > /tmp/hl; for i in 1 2 3; do ln /tmp/hl /tmp/hl$i; done; ln /etc/hostname /root/hostname-link
d=/tmp/deep; for i in $(seq 300); do d=$d/d; done; mkdir -p $d 2>/dev/null || true`, secretPath, strings.Repeat("../", 20)))
	ctx, cancel := context.WithTimeout(as("k"), 2*time.Minute)
	defer cancel()
	// Deeper than the copy goes: refused.
	if _, err := e.ForkSession(ctx, ref); err == nil {
		t.Errorf("a fork of a tree deeper than the copy goes")
	}
	mustExec(t, e, info.ID, "rm -rf /tmp/deep")
	child, err := e.ForkSession(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	res := mustExec(t, e, child.ID, `readlink /code/magic /code/up /code/etc; ls /code/fifo /tmp/sock 2>&1 | grep -c 'No such'; cat /tmp/hl3; stat -c %h /tmp/hl; cat /root/hostname-link >/dev/null && echo hn`)
	if !strings.Contains(res.Stdout, "\n2\nhl\n1\nhn\n") {
		t.Errorf("the fork has: %q (%s)", res.Stdout, res.Stderr)
	}
	for _, p := range []string{"/code/magic", "/code/up"} {
		if got, err := e.ReadSessionFile(ctx, execapi.SessionRef{ID: child.ID}, p); err == nil || string(got) == secret {
			t.Errorf("the fork reads %s: %v", p, err)
		}
	}
	if _, err := e.CloseSession(as("k"), execapi.SessionRef{ID: child.ID}); err != nil {
		t.Fatal(err)
	}
	// Hard links of one file count each time they are copied.
	mustExec(t, e, info.ID, `head -c 3000000 /dev/zero > /tmp/big; ln /tmp/big /tmp/big2; ln /tmp/big /tmp/big3`)
	if _, err := e.ForkSession(ctx, ref); err == nil {
		t.Errorf("a fork of hard links past the limit")
	}
	mustExec(t, e, info.ID, `rm /tmp/big*; head -c 100m /dev/zero > /tmp/full; head -c 100m /dev/zero > /root/full; true`)
	if _, err := e.ForkSession(ctx, ref); err == nil {
		t.Errorf("a fork of full /tmp and writable layer")
	}
	mustExec(t, e, info.ID, `rm -f /tmp/full /root/full
(while :; do echo a > /tmp/race.n; mv -f /tmp/race.n /tmp/race; ln -sfn /proc/1/root/etc /tmp/race.l; mv -fT /tmp/race.l /tmp/race; mkfifo /tmp/race.f; mv -fT /tmp/race.f /tmp/race; mkdir -p /tmp/race.d/x; rm -rf /tmp/race; mv /tmp/race.d /tmp/race; rm -rf /tmp/race; done) >/dev/null 2>&1 &
echo $! > /code/racer`)
	var wg sync.WaitGroup
	for range 3 {
		f, err := e.ForkSession(ctx, ref)
		if err != nil {
			t.Logf("a fork during the race: %v", err)
			continue
		}
		wg.Go(func() {
			r, err := execFake(t, e, "k", f.ID, `[ -p /tmp/race ] && echo fifo; [ -L /tmp/race ] && readlink /tmp/race; ls /code/racer >/dev/null && echo ok`)
			if err != nil || !strings.HasSuffix(r.Stdout, "ok\n") || strings.Contains(r.Stdout, "fifo") {
				t.Errorf("a fork made during the race: %q, %v", r.Stdout, err)
			}
			if _, err := e.CloseSession(as("k"), execapi.SessionRef{ID: f.ID}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if res := mustExec(t, e, info.ID, `kill $(cat /code/racer); echo alive`); res.Stdout != "alive\n" {
		t.Errorf("the parent after its forks: %q", res.Stdout)
	}
	var refused *execapi.SessionEndedError
	if _, err := execFake(t, e, "k", info.ID, "true"); errors.As(err, &refused) {
		t.Errorf("the parent ended: %v", err)
	}
}

// fdProbe prints the descriptors of the process it runs in, and which
// other processes' descriptors (init's, the keepers') it can open.
const fdProbe = `import os
fds = []
for f in os.listdir("/proc/self/fd"):
    try: fds.append((int(f), os.readlink("/proc/self/fd/" + f)))
    except OSError: pass  # listdir's own
print(sorted(f for f, _ in fds))
seen = []
for p in os.listdir("/proc"):
    if p.isdigit() and int(p) != os.getpid():
        try:
            seen.append((p, os.listdir("/proc/%s/fd" % p)))
        except OSError: pass
# Init and its keepers (forks of it) share its name.
print([s for s in seen if open("/proc/%s/comm" % s[0]).read() == open("/proc/1/comm").read()])
`

// A session's job and kernel hold no descriptor of init's (its control,
// status and upper-layer descriptors, its /proc and root): a kernel only
// its own pipes as fds 3 and 4, a job none; nor can either open init's or
// a keeper's descriptors through /proc.
func TestHostileSessionDescriptors(t *testing.T) {
	e := newSessionTestEngine(t, nil)
	requireRuntime(t, "python3.13")
	requireRuntime(t, "bash")
	py := openFake(t, e, "k", "python3.13")
	mustExec(t, e, py.ID, "import subprocess; subprocess.Popen(['sleep', '1000'])")
	if res := mustExec(t, e, py.ID, fdProbe); res.Stdout != "[0, 1, 2, 3, 4]\n[]\n" {
		t.Errorf("a kernel's descriptors: %q (%s)", res.Stdout, res.Stderr)
	}
	sh := openFake(t, e, "k", "bash")
	mustExec(t, e, sh.ID, "sleep 1000 >/dev/null 2>&1 &")
	probe := fmt.Sprintf("cat > /tmp/probe.py <<'X'\n%sX\npython3 /tmp/probe.py", fdProbe)
	if res := mustExec(t, e, sh.ID, probe); res.Stdout != "[0, 1, 2]\n[]\n" {
		t.Errorf("a job's descriptors: %q (%s)", res.Stdout, res.Stderr)
	}
}

// A bash job that kills its keeper, or every process it can name, or
// plants a link where the next call's code goes, ends the session cleanly
// (with a reason) or leaves it working.
func TestHostileSessionBashAttacks(t *testing.T) {
	e := newSessionTestEngine(t, nil)
	requireRuntime(t, "bash")
	for _, c := range []struct {
		name, code string
		// works: the next call must run as if nothing happened.
		works bool
	}{
		{"kill its keeper", "kill -9 $PPID; sleep 0.2; echo after", false},
		{"kill everything", "sleep 1000 >/dev/null 2>&1 & kill -9 -1; echo after", false},
		{"links where the next calls' code goes", `n=${0##*/call-}; n=${n%%[-.]*}
for i in $(seq $((n+1)) $((n+4))); do ln -s /etc/passwd /code/call-$i.sh; ln -s /etc/passwd /code/call-$i-.sh; mkdir /code/call-$i; done`, true},
		{"a link for its state", "rm -rf /code/.session; ln -s /proc/1/root/etc /code/.session", true},
		{"its own state", "printf 'garbage\\0\\377' > /code/.session/env; echo x > /code/.session/dir", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			info := openFake(t, e, "k", "bash")
			defer e.CloseSession(as("k"), execapi.SessionRef{ID: info.ID})
			mustExec(t, e, info.ID, "echo kept > /tmp/kept")
			res, err := execFake(t, e, "k", info.ID, c.code)
			if err != nil {
				t.Fatalf("the attack: %v", err)
			}
			t.Logf("the attack: exit %d %q (%s)", res.ExitCode, res.Stdout, res.Note)
			for i := range 6 {
				if res.Session.Ended != nil {
					if !res.StatePurged || res.Session.Ended.Reason == "" {
						t.Fatalf("the session ended unclean: %+v (%s)", res.Session.Ended, res.Note)
					}
					_, err := execFake(t, e, "k", info.ID, "true")
					wantEnded(t, err, res.Session.Ended.Reason)
					return
				}
				if i > 0 && res.Stdout == "kept\n" && res.ExitCode == 0 {
					return
				}
				res, err = execFake(t, e, "k", info.ID, "cat /tmp/kept")
				if c.works && (err != nil || res.Stdout != "kept\n") {
					t.Fatalf("the call after the attack: %q, %v", res.Stdout, err)
				}
				if err != nil {
					t.Logf("call %d after the attack: %v", i, err)
					var ended *execapi.SessionEndedError
					if errors.As(err, &ended) {
						t.Fatalf("the session ended without the call that ended it saying so: %v", err)
					}
				} else {
					t.Logf("call %d after the attack: exit %d %q (%s)", i, res.ExitCode, res.Stdout, res.Note)
				}
			}
			t.Fatalf("the session did not recover: %q exit %d (%s)", res.Stdout, res.ExitCode, res.Note)
		})
	}
}

// A call that forks as fast as it can and ignores every signal it may
// when its timeout comes is killed, its processes with it, or the
// session ends as unseparable; either way nothing is left.
func TestHostileSessionForkStormAtTimeout(t *testing.T) {
	e := newSessionTestEngine(t, func(c *Config) { c.Sessions.Interrupt = 300 * time.Millisecond })
	for _, c := range []struct{ runtime, code string }{
		{"bash", "trap '' INT TERM HUP; f() { trap '' INT TERM HUP; while :; do f & done; }; f"},
		{"python3.13", "import os, signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    try:\n        os.fork()\n    except OSError: pass"},
	} {
		t.Run(c.runtime, func(t *testing.T) {
			requireRuntime(t, c.runtime)
			info := openFake(t, e, "k", c.runtime)
			defer e.CloseSession(as("k"), execapi.SessionRef{ID: info.ID})
			res, err := execFakeTimeout(e, "k", info.ID, c.code, 1000)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("exit %d, ended %+v (%s)", res.ExitCode, res.Session.Ended, res.Note)
			if res.Session.Ended != nil {
				if res.Session.Ended.Reason != execapi.EndTimeoutUnseparable || !res.StatePurged {
					t.Fatalf("ended: %+v purged %v", res.Session.Ended, res.StatePurged)
				}
				return
			}
			if res.ExitCode != execapi.ExitTimeout {
				t.Fatalf("exit %d (%s)", res.ExitCode, res.Note)
			}
			after := mustExec(t, e, info.ID, "print(len([p for p in __import__('os').listdir('/proc') if p.isdigit()]))")
			if c.runtime == "bash" {
				after = mustExec(t, e, info.ID, "ls -d /proc/[0-9]* | wc -l")
			}
			t.Logf("processes after: %q", after.Stdout)
		})
	}
}

// A fork's copied files count in the new session's memory, as the same
// files written by its own code would: otherwise a fork holds, beyond its
// memory limit and outside admission's count, what its parent held. (The
// copy was once written from an engine thread, and the kernel charged it
// to the engine's cgroup: a fork of a parent holding 60 MB in /tmp showed
// 0 MB in the child's. It is written by a copier in the child's cgroup
// now, namespaces/forkcopier.go.)
func TestHostileSessionForkChargesTheChild(t *testing.T) {
	e := newSessionTestEngine(t, nil)
	requireRuntime(t, "bash")
	info := openFake(t, e, "k", "bash")
	mustExec(t, e, info.ID, "head -c 60m /dev/urandom > /tmp/f")
	child, err := e.ForkSession(as("k"), execapi.SessionRef{ID: info.ID})
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.sessions.lookup(as("k"), child.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	if used := s.l.sb.MemoryUsage(); used < 50<<20 {
		t.Errorf("the fork holds 60 MB of files; its cgroup counts %d MB", used>>20)
	}
}
