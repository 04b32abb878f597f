package hostside

import (
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// sessionOutput reads a session sandbox's output pipes for the sandbox's
// whole life. The pipes stay open across jobs (background processes keep
// writing to them, and must not get SIGPIPE), so a job's output cannot end
// at end of file, as a plain sandbox's does: it ends when init has reported
// the job and the reader has consumed what the pipe held at that moment
// (settle). The job's main process wrote all its output before init reaped
// it, so none of it is lost; what a background process writes while a job
// runs goes to that job, as a terminal would show it, and what it writes
// between jobs is counted and dropped.
type sessionOutput struct {
	pipes [2]*pipeReader
}

// pipeReader copies one pipe into its current sink. Each read happens
// under mu (in the poller's callback, once the pipe is readable), so that
// no byte is ever between the pipe and consumed: what the pipe holds
// (FIONREAD) plus consumed is exactly what was written.
type pipeReader struct {
	f  *os.File
	mu sync.Mutex
	// sink is the current job's writer; nil between jobs (then between
	// counts what is dropped).
	sink             io.Writer
	between          int64
	consumed, target int64
	eof              bool
	changed          chan struct{}
}

func newSessionOutput(stdout, stderr *os.File) *sessionOutput {
	o := &sessionOutput{}
	for i, f := range []*os.File{stdout, stderr} {
		p := &pipeReader{f: f, changed: make(chan struct{})}
		o.pipes[i] = p
		go p.run()
	}
	return o
}

func (p *pipeReader) run() {
	raw, err := p.f.SyscallConn()
	if err != nil {
		p.end()
		return
	}
	buf := make([]byte, 32<<10)
	for {
		var readErr error
		err := raw.Read(func(fd uintptr) bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			n, err := unix.Read(int(fd), buf)
			if err == unix.EAGAIN {
				return false
			}
			if err == unix.EINTR {
				return false
			}
			if n > 0 {
				if p.sink != nil {
					_, _ = p.sink.Write(buf[:n])
				} else {
					p.between += int64(n)
				}
				p.consumed += int64(n)
				p.notify()
			}
			if err != nil {
				readErr = err
			} else if n == 0 {
				readErr = io.EOF
			}
			return true
		})
		if err != nil || readErr != nil {
			p.end()
			return
		}
	}
}

// notify wakes whoever waits for the reader (mu held).
func (p *pipeReader) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *pipeReader) end() {
	p.mu.Lock()
	p.eof = true
	p.notify()
	p.mu.Unlock()
}

// start points the pipes at a job's writers (nil discards) and returns
// what was dropped since the last job.
func (o *sessionOutput) start(stdout, stderr io.Writer) int64 {
	var dropped int64
	for i, w := range []io.Writer{stdout, stderr} {
		if w == nil {
			w = io.Discard
		}
		p := o.pipes[i]
		p.mu.Lock()
		p.sink = w
		dropped += p.between
		p.between = 0
		p.mu.Unlock()
	}
	return dropped
}

// settle waits, at most timeout in all, until each pipe's reader has
// consumed what the pipe held when settle began, and then points the pipes
// back at the between-jobs counter. It reports whether both caught up.
func (o *sessionOutput) settle(timeout time.Duration) bool {
	for _, p := range o.pipes {
		p.mu.Lock()
		held, err := pending(p.f)
		if err != nil {
			held = 0
		}
		p.target = p.consumed + int64(held)
		p.mu.Unlock()
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	all := true
	for _, p := range o.pipes {
		if !p.wait(deadline.C) {
			all = false
			break
		}
	}
	for _, p := range o.pipes {
		p.mu.Lock()
		p.sink = nil
		p.mu.Unlock()
	}
	return all
}

func (p *pipeReader) wait(deadline <-chan time.Time) bool {
	for {
		p.mu.Lock()
		done := p.eof || p.consumed >= p.target
		changed := p.changed
		p.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-changed:
		case <-deadline:
			return false
		}
	}
}

// pending is how many bytes f (a pipe) holds unread (FIONREAD, which
// Linux names TIOCINQ).
func pending(f *os.File) (int, error) {
	raw, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var ioErr error
	if err := raw.Control(func(fd uintptr) { n, ioErr = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); err != nil {
		return 0, err
	}
	return n, ioErr
}
