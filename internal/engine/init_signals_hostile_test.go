//go:build hostile

package engine

import (
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// signalInit writes a return file, then sends pid 1 what send names, and
// ends normally (exit 0, "done") if it is still alive a moment later.
const signalInit = `import ctypes, os, signal, sys, time
open("/tmp/kept", "w").write("kept\n")
libc = ctypes.CDLL(None, use_errno=True)
send = sys.argv[1:] or SEND
every = [getattr(signal, n) for n in ("SIGQUIT", "SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL", "SIGFPE", "SIGTRAP",
    "SIGSYS", "SIGPIPE", "SIGTERM", "SIGINT", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGXCPU", "SIGXFSZ",
    "SIGVTALRM", "SIGPWR", "SIGSTKFLT", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGSTOP", "SIGKILL")] + list(range(32, 65))
def tgid(pid):
    try:
        return int([l for l in open("/proc/%d/status" % pid) if l.startswith("Tgid:")][0].split()[1])
    except (OSError, IndexError):
        return 0
for name in send:
    if name == "storm":
        # pid 1, and any thread of it a lower pid names, over and over.
        targets = [1] + [p for p in range(2, os.getpid()) if tgid(p) == 1]
        for _ in range(5):
            for pid in targets:
                for sig in every:
                    os.kill(pid, sig)
                    libc.syscall(200, pid, sig)  # tkill
    elif name == "forged SIGSEGV":
        # si_code SI_QUEUE: not a kill(2), so a runtime may take it for a
        # real fault.
        info = (ctypes.c_int * 32)()
        info[0], info[2] = signal.SIGSEGV, -1
        libc.syscall(129, 1, signal.SIGSEGV, ctypes.byref(info))
    else:
        os.kill(1, name if isinstance(name, int) else getattr(signal, name))
time.sleep(0.3)
print("done")
`

// "a2VwdAo=" is base64 of "kept\n".
const keptB64 = "a2VwdAo="

// Signals user code sends to pid 1 neither end nor stop the sandbox's
// init: the program ends as it would have, with its exit status and return
// files. On Linux the kernel ignores, for a pid namespace's init, every
// signal it has no handler for; gVisor's Sentry does not, and its init is
// a Go program (see goinit's reaper.go for how it survives there).
func TestHostileSignalsToInit(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		cases := []struct {
			name string
			send string
		}{
			{"every catchable signal", `["SIGQUIT", "SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL", "SIGFPE", "SIGTRAP", "SIGSYS",
    "SIGPIPE", "SIGTERM", "SIGINT", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGXCPU", "SIGXFSZ", "SIGVTALRM",
    "SIGPWR", "SIGSTKFLT", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGCHLD", "SIGCONT", "SIGWINCH", "SIGURG", 32, 33, "SIGRTMIN", 35, "SIGRTMAX"]`},
			{"SIGSTOP", `["SIGSTOP"]`},
			{"SIGSTOP and exit at once", `["SIGSTOP"]`},
			{"SIGKILL", `["SIGKILL"]`},
			{"forged SIGSEGV", `["forged SIGSEGV"]`},
			{"a storm at pid 1 and its threads", `["storm"]`},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				code := strings.Replace(signalInit, "SEND", c.send, 1)
				if c.name == "SIGSTOP and exit at once" {
					code = strings.Replace(code, "time.sleep(0.3)\n", "", 1)
				}
				res := run(t, e, execapi.Request{Runtime: "python3.13", Code: code, ReturnFiles: []string{"/tmp/kept"}})
				if res.Files["/tmp/kept"] != keptB64 {
					t.Errorf("the return file was lost: files %v, note %q", res.Files, res.Note)
				}
				if res.ExitCode != 0 || res.Stdout != "done\n" || res.Note != "" {
					t.Errorf("exit %d stdout %q stderr %q note %q: want the program's own end", res.ExitCode, res.Stdout, res.Stderr, res.Note)
				}
			})
		}
	})
}

// Nor does a signal to the program's own process group reach pid 1: the
// program ends by its own SIGKILL, and nothing else ends with it.
func TestHostileProcessGroupKillSparesInit(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		res := run(t, e, execapi.Request{Runtime: "python3.13", ReturnFiles: []string{"/tmp/kept"}, Code: `import os, signal, time
open("/tmp/kept", "w").write("kept\n")
if os.fork() == 0:
    os.kill(0, signal.SIGKILL)
time.sleep(5)
print("the group kill missed the program")
`})
		if res.Files["/tmp/kept"] != keptB64 || res.ExitCode != execapi.ExitKilled || strings.Contains(res.Note, "pid 1") {
			t.Errorf("exit %d files %v note %q stdout %q: want the program's own SIGKILL (137), its return file and no note about pid 1",
				res.ExitCode, res.Files, res.Note, res.Stdout)
		}
	})
}

// Nor can user code read what of pid 1 the kernel guards (its I/O, its
// descriptors, its namespaces, its environment, its threads') or change
// its out-of-memory score: on Linux the sandbox's init belongs to the
// host's root and is not dumpable; gVisor's reaper hides them.
func TestHostileInitProcHidden(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		res := run(t, e, execapi.Request{Runtime: "python3.13", Code: `import os
def tgid(pid):
    try:
        return int([l for l in open("/proc/%d/status" % pid) if l.startswith("Tgid:")][0].split()[1])
    except (OSError, IndexError):
        return 0
def adjust():
    with open("/proc/1/oom_score_adj", "w") as f:
        f.write("1000")
    return "written"
probes = [
    ("io", lambda: open("/proc/1/io").read().strip()),
    ("environ", lambda: open("/proc/1/environ").read().strip()),
    ("fd", lambda: os.listdir("/proc/1/fd")),
    ("ns", lambda: [os.readlink("/proc/1/ns/" + n) for n in os.listdir("/proc/1/ns")]),
    ("task", lambda: [open("/proc/1/task/%s/io" % t).read() for t in os.listdir("/proc/1/task")]),
    ("threads", lambda: [open("/proc/%d/io" % p).read() for p in range(2, os.getpid()) if tgid(p) == 1]),
    ("oom_score_adj", adjust),
]
for name, probe in probes:
    try:
        got = probe()
    except OSError:
        got = None
    print(name, repr(got) if got else "hidden")
`})
		want := "io hidden\nenviron hidden\nfd hidden\nns hidden\ntask hidden\nthreads hidden\noom_score_adj hidden\n"
		if res.ExitCode != 0 || res.Stdout != want {
			t.Errorf("exit %d stdout %q (want %q) stderr %q", res.ExitCode, res.Stdout, want, res.Stderr)
		}
	})
}

// Nor can user code change init's resource limits (it runs as init's uid,
// which would let it): with no descriptor left, init could not read the
// return files; with a tiny address space or CPU time, it would die.
func TestHostileInitLimitsUntouchable(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		res := run(t, e, execapi.Request{Runtime: "python3.13", ReturnFiles: []string{"/tmp/kept"}, Code: `import resource
open("/tmp/kept", "w").write("kept\n")
for name in ("RLIMIT_NOFILE", "RLIMIT_AS", "RLIMIT_CPU"):
    try:
        resource.prlimit(1, getattr(resource, name), (1, 1)); print(name, "lowered")
    except OSError as e: print(name, e.strerror)
print(resource.prlimit(1, resource.RLIMIT_NOFILE)[0] > 0)
print(resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64)))
`})
		if res.Files["/tmp/kept"] != keptB64 || res.ExitCode != 0 {
			t.Errorf("exit %d files %v note %q stdout %q stderr %q", res.ExitCode, res.Files, res.Note, res.Stdout, res.Stderr)
		}
		// gVisor's pid 1 is the reaper, shielded as the kernel shields a
		// namespace's init.
		if strings.Contains(res.Stdout, "lowered") {
			t.Errorf("user code changed init's limits: %q", res.Stdout)
		}
		// Reading another process's limits and setting one's own still work.
		if !strings.HasSuffix(res.Stdout, "True\nNone\n") {
			t.Errorf("stdout %q: want reading pid 1's limits and setting its own to work", res.Stdout)
		}
	})
}
