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
for name in send:
    if name == "forged SIGSEGV":
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
				// Under gVisor user code can still end the reaper, pid 1 of
				// its view, with what no process can catch: that ends the
				// program's processes, and init says so.
				if isGVisor(e) && (c.name == "SIGKILL" || c.name == "forged SIGSEGV") {
					if res.ExitCode != execapi.ExitKilled || !strings.Contains(res.Note, "ended pid 1 of its processes") {
						t.Errorf("exit %d note %q: want 137 and a note that the program ended its pid 1", res.ExitCode, res.Note)
					}
					return
				}
				if res.ExitCode != 0 || res.Stdout != "done\n" || res.Note != "" {
					t.Errorf("exit %d stdout %q stderr %q note %q: want the program's own end", res.ExitCode, res.Stdout, res.Stderr, res.Note)
				}
			})
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
		// gVisor's pid 1 is the reaper; init is out of reach anyway.
		if !isGVisor(e) && strings.Contains(res.Stdout, "lowered") {
			t.Errorf("user code changed init's limits: %q", res.Stdout)
		}
		// Reading another process's limits and setting one's own still work.
		if !strings.HasSuffix(res.Stdout, "True\nNone\n") {
			t.Errorf("stdout %q: want reading pid 1's limits and setting its own to work", res.Stdout)
		}
	})
}
