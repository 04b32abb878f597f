package engine

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

func TestTimeoutKillsEverything(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		cases := map[string]execapi.Request{
			"busy loop":       {Runtime: "python3.13", Code: "while True: pass"},
			"ignores SIGTERM": {Runtime: "bash", Code: "trap '' TERM INT HUP\necho started\nwhile :; do sleep 1; done"},
			"new session":     {Runtime: "python3.13", Code: "import os, time\nos.setsid()\nif os.fork() == 0:\n    time.sleep(100)\nos.wait()"},
		}
		for name, req := range cases {
			t.Run(name, func(t *testing.T) {
				req.Limits.TimeoutMS = 1000
				start := time.Now()
				res := run(t, e, req)
				if res.ExitCode != execapi.ExitTimeout {
					t.Errorf("exit %d, want 124 (stderr %q)", res.ExitCode, res.Stderr)
				}
				if !strings.Contains(res.Note, "timeout") {
					t.Errorf("note %q does not mention the timeout", res.Note)
				}
				// Generous bound: the point is that a 100 s sleeper does not hold us.
				if d := time.Since(start); d > 20*time.Second {
					t.Errorf("took %s for a 1 s timeout", d)
				}
			})
		}
	})
}

// A process that daemonizes does not keep the run (or anything) alive.
func TestDaemonizedProcessDiesWithRun(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		res := run(t, e, execapi.Request{Runtime: "bash", Limits: execapi.Limits{TimeoutMS: 20000},
			Code: "setsid bash -c 'trap \"\" TERM; exec sleep 1000' </dev/null >/dev/null 2>&1 &\nnohup sleep 1000 >/dev/null 2>&1 &\ndisown -a\necho parent done"})
		if res.ExitCode != 0 || res.Stdout != "parent done\n" {
			t.Errorf("exit %d stdout %q note %q", res.ExitCode, res.Stdout, res.Note)
		}
		if res.ExecutionMS > 10000 {
			t.Errorf("the run waited for its daemons (%d ms)", res.ExecutionMS)
		}
	})
}

func TestMemoryLimitKills(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		res := run(t, e, execapi.Request{Runtime: "python3.13", Limits: execapi.Limits{MemoryMB: 64},
			Code: "chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))\n"})
		if res.ExitCode != execapi.ExitKilled {
			t.Errorf("exit %d, want 137 (stderr %q)", res.ExitCode, res.Stderr)
		}
		if !strings.Contains(res.Note, "memory limit") {
			t.Errorf("note %q does not say the memory limit was hit", res.Note)
		}
	})
}

func TestForkBombIsContained(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		// The bomb runs until the sandbox shows 200 processes and two seconds
		// more (the limit is 256 tasks), however slowly the level forks
		// on a loaded machine (gVisor's Sentry, seen taking over 2 s);
		// the wait forks nothing, since forks fail once the table is full.
		res := run(t, e, execapi.Request{Runtime: "bash", Limits: execapi.Limits{TimeoutMS: 20000},
			Code: forkBombUntilFull})
		// Whatever the bomb's own exit, the run ends and the machine still works.
		if res.ExitCode == 0 && !strings.Contains(res.Stdout, "survived") {
			t.Errorf("unexpected result: exit %d stdout %q", res.ExitCode, res.Stdout)
		}
		// And the caller is told why its forks failed: on the host the
		// cgroup counts the refused forks; gVisor's Sentry keeps no count,
		// so it can only say that the limit was reached.
		want := regexp.MustCompile(`The process limit of 256 was hit: [1-9][0-9]* fork/clone calls failed\.`)
		if isGVisor(e) {
			want = regexp.MustCompile(`The process limit of 256 was hit\.`)
		}
		if !want.MatchString(res.Note) {
			t.Errorf("note %q does not match %q", res.Note, want)
		}
		after := run(t, e, execapi.Request{Runtime: "bash", Code: "echo ok"})
		if after.Stdout != "ok\n" {
			t.Errorf("the next run after a fork bomb printed %q", after.Stdout)
		}
		if strings.Contains(after.Note, "process limit") {
			t.Errorf("the next run's note %q speaks of the process limit", after.Note)
		}
	})
}

func TestHugeOutputIsCapped(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		res := run(t, e, execapi.Request{Runtime: "python3.13", Limits: execapi.Limits{TimeoutMS: 30000},
			Code: "import sys\nblock = 'x' * (1 << 20)\nfor _ in range(100):\n    sys.stdout.write(block)\nsys.stdout.flush()\nprint('done', file=sys.stderr)"})
		if res.ExitCode != 0 {
			t.Fatalf("exit %d, note %q", res.ExitCode, res.Note)
		}
		if len(res.Stdout) != 1<<20 {
			t.Errorf("stdout is %d bytes, want exactly the 1 MiB cap", len(res.Stdout))
		}
		if res.Stderr != "done\n" {
			t.Errorf("stderr %q", res.Stderr)
		}
		if !strings.Contains(res.Note, "stdout was cut") {
			t.Errorf("note %q does not say stdout was cut", res.Note)
		}
	})
}

func TestFillingTmpFailsCleanly(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		res := run(t, e, execapi.Request{Runtime: "bash", Limits: execapi.Limits{MemoryMB: 512},
			Code: "dd if=/dev/zero of=/tmp/fill bs=1M 2>&1 | grep -o 'No space left'; df -k /tmp | tail -1; echo after"})
		if !strings.Contains(res.Stdout, "No space left") || !strings.Contains(res.Stdout, "100%") || !strings.HasSuffix(res.Stdout, "after\n") {
			t.Errorf("stdout %q: want ENOSPC from dd and the script to go on", res.Stdout)
		}
	})
}

func TestNothingPersistsBetweenCalls(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		first := run(t, e, execapi.Request{Runtime: "bash",
			Code: "for f in /tmp/p /root/p /etc/p /code/p /var/tmp/p /dev/shm/p; do echo x > $f || echo cannot $f; done; ls /tmp/p /root/p /etc/p"})
		if first.ExitCode != 0 {
			t.Fatalf("first call: exit %d stdout %q stderr %q", first.ExitCode, first.Stdout, first.Stderr)
		}
		second := run(t, e, execapi.Request{Runtime: "bash",
			Code: "for f in /tmp/p /root/p /etc/p /code/p /var/tmp/p /dev/shm/p; do [ -e $f ] && echo found $f; done; echo checked"})
		if second.Stdout != "checked\n" {
			t.Errorf("second call saw the first's files: %q", second.Stdout)
		}
	})
}

// The sandbox has a working loopback and nothing else: no other interface and
// no route (no packet is sent anywhere but loopback here).
func TestOnlyLoopbackInterface(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		res := run(t, e, execapi.Request{Runtime: "python3.13",
			Code: `import socket
print(sorted(n for _, n in socket.if_nameindex()))
print(len(open('/proc/net/route').read().splitlines()) - 1, 'routes')
srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen()
c = socket.create_connection(srv.getsockname(), timeout=2)
print('loopback works')
`})
		if res.Stdout != "['lo']\n0 routes\nloopback works\n" {
			t.Errorf("stdout %q stderr %q: want only a working lo and no routes", res.Stdout, res.Stderr)
		}
	})
}

// forkBombUntilFull starts a fork bomb and waits, with builtins only, until
// the sandbox shows 200 processes (or 15 s passed), then two seconds more,
// and says it survived.
const forkBombUntilFull = `bomb() { bomb | bomb; }; bomb &
shopt -s nullglob
now() { local t=${EPOCHREALTIME/./}; REPLY=$((10#$t)); }
now; start=$REPLY
while p=(/proc/[0-9]*); now; (( ${#p[@]} < 200 && REPLY - start < 15000000 )); do :; done
now; end=$((REPLY + 2000000))
while now; (( REPLY < end )); do :; done
echo survived`
