package main

import (
	"bufio"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// process is a running scratchrun process a test drives (`serve`, a
// `worker`): its stderr collected line by line, stopped with SIGTERM when
// the test ends.
type process struct {
	// name is what messages call it: "serve", a worker's id.
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs strings.Builder
	// done is closed once cmd.Wait has returned, with its error in err:
	// the only way to learn the process has exited without reading
	// cmd.ProcessState, which Wait writes in another goroutine.
	done chan struct{}
	err  error
}

// stderr is what the process has written to stderr so far.
func (p *process) stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// start starts cmd as p and waits (a minute at most) for a line of its
// stderr matching ready, returning the match's first group (the whole
// match if it has none). readyWord names that moment in messages
// ("listening"). At the test's end p gets SIGTERM, then SIGKILL and an
// error if it has not exited after a minute.
func (p *process) start(t *testing.T, cmd *exec.Cmd, ready *regexp.Regexp, readyWord string) string {
	t.Helper()
	p.cmd = cmd
	p.done = make(chan struct{})
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Buffered: the goroutine goes on collecting lines whether or not
	// anyone still waits for the first match.
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			p.mu.Lock()
			p.logs.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if m := ready.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[len(m)-1]:
				default:
				}
			}
		}
		// Wait only once stderr is read to its end, as StderrPipe requires.
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				t.Errorf("%s did not exit after SIGTERM:\n%s", p.name, p.stderr())
			}
		}
	})
	select {
	case match := <-found:
		return match
	case <-p.done:
		t.Fatalf("%s exited before %s (%v):\n%s", p.name, readyWord, p.err, p.stderr())
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not start %s:\n%s", p.name, readyWord, p.stderr())
	}
	return ""
}

// exited reports whether the process has exited (and its stderr been read).
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait returns the exit status once the process ends (bounded to catch hangs).
func (p *process) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
		var ee *exec.ExitError
		if errors.As(p.err, &ee) {
			return ee.ExitCode()
		}
		if p.err != nil {
			t.Fatal(p.err)
		}
		return 0
	case <-time.After(90 * time.Second):
		t.Fatalf("%s did not exit:\n%s", p.name, p.stderr())
		return -1
	}
}

// stop ends the process as an operator does (SIGTERM) and fails t unless it
// drains and exits 0.
func (p *process) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Errorf("%s exited %d:\n%s", p.name, code, p.stderr())
	}
}

// waitLog waits for a line of the process's stderr matching re and returns
// its first group.
func (p *process) waitLog(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := re.FindStringSubmatch(p.stderr()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line matching %s:\n%s", re, p.stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
