package nsinit

import (
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// RunIfRequested turns the process into a gVisor sandbox's init (or the
// probe) when it was started as one, and never returns in that case. Every
// binary that creates gVisor sandboxes (scratchrun itself, and test
// binaries) calls it first thing in main or TestMain.
func RunIfRequested() {
	if code, ran := runOtherRole(); ran { // see gvisor.go
		os.Exit(code)
	}
}

// Main is the entry point of the dedicated scratchrun-init binary.
func Main() {
	if code, ran := runOtherRole(); ran {
		os.Exit(code)
	}
	os.Stderr.WriteString("scratchrun-init: runs only as a gVisor sandbox's init, started by the engine\n")
	os.Exit(2)
}

// serveProtocol is init's side of the protocol (the namespaces backend's C
// init, spawner/c/init.c, follows the same steps): read the setup, prepare
// the sandbox (prepare finishes it and confines init), pre-start the
// interpreter, report ready, read the one job, run it, report its result.
func serveProtocol(prepare func(SetupMessage) error) int {
	// Nothing init inherited beyond its five descriptors may reach user
	// code, whatever the engine's own parent left open in it.
	_ = unix.CloseRange(statusFD+1, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	control := os.NewFile(controlFD, "control")
	status := os.NewFile(statusFD, "status")
	// User code must not inherit the engine's pipes.
	unix.CloseOnExec(controlFD)
	unix.CloseOnExec(statusFD)
	var setup SetupMessage
	if err := ReadMessage(control, MaxSetupBytes, &setup); err != nil {
		return 1
	}
	if err := prepare(setup); err != nil {
		_ = WriteMessage(status, ReadyMessage{Error: err.Error()})
		return 1
	}
	var warm *prestarted
	if setup.Prestart != nil {
		// A pre-start that fails is not fatal: the job then starts cold.
		warm, _ = startPrestart(*setup.Prestart)
	}
	if err := WriteMessage(status, ReadyMessage{Ready: true}); err != nil {
		return 1
	}

	var job JobMessage
	if err := ReadMessage(control, MaxJobBytes, &job); err != nil {
		// The engine went away or destroyed us unused: nothing to report.
		return 0
	}
	control.Close()
	if err := WriteMessage(status, runJob(job, warm)); err != nil {
		return 1
	}
	return 0
}

// runJob stages files, runs the program, reaps every process and collects
// the return files. Init is already confined (prepare did it).
func runJob(job JobMessage, warm *prestarted) ResultMessage {
	res := ResultMessage{Files: map[string][]byte{}}
	if err := writeFiles(job.Files); err != nil {
		res.Error = err.Error()
		return res
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
