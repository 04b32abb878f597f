package nsinit

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/seccomp/bpfload"
)

// RunIfRequested turns the process into a sandbox's init when it was
// started as one, and never returns in that case. Every binary that creates
// sandboxes (scratchrun itself, and test binaries) calls it first thing in main
// or TestMain.
func RunIfRequested() {
	if code, ran := runOtherRole(); ran { // gVisor roles: see gvisor.go
		os.Exit(code)
	}
	if len(os.Args) == 0 || os.Args[0] != Arg0 {
		return
	}
	// Capability bounding set, cgroup namespace and the fork of user code are
	// per-thread in Linux: do all of them on one thread.
	runtime.LockOSThread()
	os.Exit(runInit())
}

// Main runs init unconditionally: the entry point of the dedicated
// scratchrun-init binary.
func Main() {
	if code, ran := runOtherRole(); ran { // gVisor roles: see gvisor.go
		os.Exit(code)
	}
	runtime.LockOSThread()
	os.Exit(runInit())
}

func runInit() int {
	return serveProtocol(func(setup SetupMessage) error {
		if err := buildRoot(setup); err != nil {
			return err
		}
		if setup.Prestart != nil || setup.LockDownEarly {
			return lockDown(setup)
		}
		return nil
	})
}

// serveProtocol is init's side of the protocol, the same for every kind of
// sandbox: read the setup, prepare the sandbox (prepare builds it and, when
// it must, confines it before ready), pre-start the interpreter, report
// ready, read the one job, run it, report its result.
func serveProtocol(prepare func(SetupMessage) error) int {
	// Nothing init inherited beyond its five descriptors may reach user
	// code, whatever the engine's own parent left open in it.
	_ = unix.CloseRange(statusFD+1, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	control := os.NewFile(controlFD, "control")
	status := os.NewFile(statusFD, "status")
	// User code must not inherit the engine's pipes.
	unix.CloseOnExec(controlFD)
	unix.CloseOnExec(statusFD)
	dec := json.NewDecoder(control)
	enc := json.NewEncoder(status)

	var setup SetupMessage
	if err := dec.Decode(&setup); err != nil {
		return 1
	}
	if err := prepare(setup); err != nil {
		_ = enc.Encode(ReadyMessage{Error: err.Error()})
		return 1
	}
	var warm *prestarted
	if setup.Prestart != nil {
		// A pre-start that fails is not fatal: the job then starts cold.
		warm, _ = startPrestart(*setup.Prestart)
	}
	if err := enc.Encode(ReadyMessage{Ready: true}); err != nil {
		return 1
	}

	var job JobMessage
	if err := dec.Decode(&job); err != nil {
		// The engine went away or destroyed us unused: nothing to report.
		return 0
	}
	control.Close()
	if err := enc.Encode(runJob(job, warm, setup)); err != nil {
		return 1
	}
	return 0
}

// runJob stages files, locks the sandbox down, runs the program, reaps every
// process and collects the return files.
func runJob(job JobMessage, warm *prestarted, setup SetupMessage) ResultMessage {
	res := ResultMessage{Files: map[string][]byte{}}
	if err := writeFiles(job.Files); err != nil {
		res.Error = err.Error()
		return res
	}
	if !lockedDown {
		if err := lockDown(setup); err != nil {
			res.Error = err.Error()
			return res
		}
	}
	start := time.Now()
	pid, err := warm.deliver(job)
	if err != nil {
		// No (live) pre-started interpreter: start the program cold.
		pid, err = startCold(job)
	}
	if err != nil {
		res.Error = err.Error()
		return res
	}
	res.Started = true

	var timedOut atomic.Bool
	timer := time.AfterFunc(job.Timeout, func() {
		timedOut.Store(true)
		_ = syscall.Kill(-1, syscall.SIGKILL)
	})
	status := reapUntil(pid)
	res.Duration = time.Since(start)
	timer.Stop()
	// Whatever the program left behind (daemons, stray children) dies now,
	// before return files are read, so nothing can change them under us.
	_ = syscall.Kill(-1, syscall.SIGKILL)
	reapAll()
	res.TimedOut = timedOut.Load()

	switch {
	case status.Signaled():
		res.Signal = int(status.Signal())
		res.ExitCode = 128 + res.Signal
	default:
		res.ExitCode = status.ExitStatus()
	}
	res.Files, res.Notes = collectFiles(job.ReturnFiles, job.MaxReturnBytes)
	return res
}

// reapUntil reaps children (orphans reparent to us, pid 1) until pid exits,
// and returns pid's status.
func reapUntil(pid int) syscall.WaitStatus {
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return ws
		}
		if got == pid {
			return ws
		}
	}
}

// reapAll reaps until no child is left.
func reapAll() {
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return
		}
	}
}

// lockedDown records that lockDown has run (it must run exactly once).
var lockedDown bool

// lockDown is the last step before user code: a fresh cgroup namespace rooted
// at the sandbox's cgroup, capabilities cut to Docker's default set, init made
// unreadable to ptrace, and the seccomp filter (which also sets no_new_privs).
func lockDown(setup SetupMessage) error {
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return fmt.Errorf("unshare cgroup namespace: %w", err)
	}
	if err := dropBoundingSet(setup.KeepCapabilities); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("set init non-dumpable: %w", err)
	}
	if err := bpfload.InstallEncoded(setup.Seccomp); err != nil {
		return fmt.Errorf("install seccomp filter: %w", err)
	}
	lockedDown = true
	return nil
}
