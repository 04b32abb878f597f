package goinit

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// descendants finds a process's children and grandchildren in /proc, and
// kills them all (and nothing else) when asked.
func TestDescendantsFindsAndKillsTheTree(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 1000 & (sleep 1000 & wait) & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	proc, err := unix.Open("/proc", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(proc)
	// sh, its subshell and the two sleeps: three below sh once all forked.
	found := 0
	for deadline := time.Now().Add(20 * time.Second); found < 3 && time.Now().Before(deadline); {
		found = descendants(proc, cmd.Process.Pid, 0)
		if found < 3 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if found != 3 {
		_ = cmd.Process.Kill()
		t.Fatalf("found %d descendants, want 3", found)
	}
	descendants(proc, cmd.Process.Pid, syscall.SIGKILL)
	select {
	case err := <-done:
		// sh itself was spared: its waits return and it exits by itself.
		if err != nil {
			t.Errorf("sh did not exit by itself: %v", err)
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("sh's children were not killed")
	}
}
