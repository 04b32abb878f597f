package hostside

import (
	"os/exec"
	"runtime"
	"sync"
)

// A parent-death signal (SysProcAttr.Pdeathsig) fires when the thread that
// forked the child exits, not when the engine does (golang/go#27505). The
// engine retires threads on purpose: a goroutine that cannot return its
// thread to the host's network namespace ends still locked to it, and the
// runtime then ends the thread. A QEMU or runsc forked from such a thread
// earlier, by whatever goroutine ran there, would be killed with it in the
// middle of its sandbox. Every child that lives past the call starting it
// is therefore forked by one goroutine locked to its thread for the
// engine's life: its thread ends only with the engine.

// startRequest is one child for the starter to start.
type startRequest struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	starterOnce sync.Once
	starts      chan startRequest
)

// StartChild is cmd.Start, run from the starter's thread, which lives as
// long as the engine: cmd's parent-death signal then fires when the engine
// dies, never earlier. Use it for every child that has one.
func StartChild(cmd *exec.Cmd) error {
	starterOnce.Do(func() {
		starts = make(chan startRequest)
		go serveStarts()
	})
	req := startRequest{cmd: cmd, done: make(chan error, 1)}
	starts <- req
	return <-req.done
}

// RunChild is cmd.Run with the start made by StartChild.
func RunChild(cmd *exec.Cmd) error {
	if err := StartChild(cmd); err != nil {
		return err
	}
	return cmd.Wait()
}

// serveStarts is the starter: locked to its thread and never unlocked, and
// it never returns, so nothing else runs on the thread (it stays in the
// engine's namespaces) and the thread never exits.
func serveStarts() {
	runtime.LockOSThread()
	for req := range starts {
		req.done <- req.cmd.Start()
	}
}
