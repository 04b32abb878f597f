package namespaces

import (
	"fmt"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// startIn starts cmd; with a network given, from a thread that has joined the
// network's namespace, so that the child is born in it. Go's fork runs on the
// calling thread, and a network namespace is a per-thread property, so the
// thread is locked for the duration and returned home afterwards.
func startIn(cmd *exec.Cmd, network *sandbox.Network) error {
	if network == nil {
		return cmd.Start()
	}
	runtime.LockOSThread()
	home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("open own network namespace: %w", err)
	}
	defer unix.Close(home)
	if err := unix.Setns(network.NetNSFD, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("join the sandbox's network namespace: %w", err)
	}
	startErr := cmd.Start()
	if err := unix.Setns(home, unix.CLONE_NEWNET); err != nil {
		// Stuck in the sandbox's namespace: keep the thread locked so the
		// runtime retires it instead of reusing it.
		return fmt.Errorf("return to the engine's network namespace: %w (start: %v)", err, startErr)
	}
	runtime.UnlockOSThread()
	return startErr
}
