package hostside

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The main goroutine keeps the main thread to itself: the runtime wedges
// rather than ends the main thread when a goroutine ends locked to it, and
// the tests below need their goroutines' threads to end.
func init() { runtime.LockOSThread() }

// A child with a parent-death signal, started through StartChild by a
// goroutine that then ends locked to its thread (the runtime retires the
// thread, as it does after a failed return from a network namespace),
// lives on; started with plain cmd.Start from there, it dies with the
// thread, which is what the test must tell apart.
func TestStartChildOutlivesARetiredThread(t *testing.T) {
	for _, c := range []struct {
		name     string
		start    func(*exec.Cmd) error
		survives bool
	}{
		{"plain Start", (*exec.Cmd).Start, false},
		{"StartChild", StartChild, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if alive := startFromRetiredThread(t, c.start); alive != c.survives {
				t.Errorf("child alive after its starting thread ended: %v, want %v", alive, c.survives)
			}
		})
	}
}

// startFromRetiredThread starts a child that answers one line with
// "alive", from a goroutine that locks its thread and ends without
// unlocking it; once that thread is gone it asks the child, and reports
// whether it answered.
func startFromRetiredThread(t *testing.T, start func(*exec.Cmd) error) bool {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "read line; echo alive")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	type started struct {
		tid int
		err error
	}
	ch := make(chan started, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		ch <- started{unix.Gettid(), start(cmd)}
	}()
	s := <-ch
	if s.err != nil {
		t.Fatal(s.err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	waitThreadGone(t, s.tid)
	// A parent-death signal was sent, if at all, before the thread was
	// reaped: a killed child answers nothing.
	_, _ = fmt.Fprintln(stdin, "are you there")
	stdin.Close()
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	return line == "alive\n"
}

// waitThreadGone waits until thread tid of this process has exited.
func waitThreadGone(t *testing.T, tid int) {
	t.Helper()
	path := fmt.Sprintf("/proc/self/task/%d", tid)
	for range 10000 {
		if _, err := os.Stat(path); os.IsNotExist(err) {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("thread %d did not end after its goroutine ended locked to it", tid)
}
