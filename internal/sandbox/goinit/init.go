package goinit

import (
	"os"
	"syscall"
)

// RunIfRequested turns the process into a gVisor sandbox's init (or its
// reaper, or the probe), or a microVM guest's, when it was started as one,
// and never returns in that case. Every binary that creates gVisor sandboxes (scratchrun itself,
// and test binaries) calls it first thing in main or TestMain.
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
	os.Stderr.WriteString("scratchrun-init: runs only as a gVisor sandbox's or a microVM guest's init, started by the engine\n")
	os.Exit(2)
}

// reapUntil reaps children (orphans reparent to the caller, a pid 1) until
// pid exits, and returns pid's status.
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
