package goinit

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// prestarted is an interpreter started before the job arrived, waiting
// on its fd 3 for what to run. It has never run user code, so handing it the
// job keeps the sandbox fresh; it saves the interpreter's start-up and heavy
// imports from the job's latency.
type prestarted struct {
	pid     int
	control *os.File // write end of the interpreter's fd 3
}

// output is the program's stdout and stderr: descriptors of the process
// that starts it.
type output [2]uintptr

// startPrestart starts spec's interpreter with a pipe on its fd 3.
func startPrestart(spec initproto.PrestartSpec, out output) (*prestarted, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	devNull, err := os.Open("/dev/null")
	if err != nil {
		w.Close()
		return nil, err
	}
	defer devNull.Close()
	pid, err := startWithDefaultSignals(func() (int, error) {
		return syscall.ForkExec(spec.Argv[0], spec.Argv, &syscall.ProcAttr{
			Dir:   spec.Dir,
			Env:   spec.Env,
			Files: []uintptr{devNull.Fd(), out[0], out[1], r.Fd()},
			Sys:   userProcessGroup(),
		})
	})
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("pre-start %s: %w", spec.Argv[0], err)
	}
	return &prestarted{pid: pid, control: w}, nil
}

// deliver hands job to the interpreter and returns its pid; an error means
// the caller must start the job cold (nothing of it has run).
func (p *prestarted) deliver(job initproto.JobMessage) (int, error) {
	if p == nil {
		return 0, errors.New("no pre-started interpreter")
	}
	defer p.control.Close()
	var ws syscall.WaitStatus
	if got, err := syscall.Wait4(p.pid, &ws, syscall.WNOHANG, nil); got == p.pid || err != nil {
		return 0, errors.New("the pre-started interpreter died before the job arrived")
	}
	if _, err := p.control.Write(initproto.PrestartJob(job.Argv, job.Env, job.Dir)); err != nil {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
		_, _ = syscall.Wait4(p.pid, &ws, 0, nil)
		return 0, fmt.Errorf("hand the job to the pre-started interpreter: %w", err)
	}
	return p.pid, nil
}

// startCold starts the job's command as a new process.
func startCold(job initproto.JobMessage, out output) (int, error) {
	devNull, err := os.Open("/dev/null")
	if err != nil {
		return 0, fmt.Errorf("open /dev/null: %w", err)
	}
	defer devNull.Close()
	pid, err := startWithDefaultSignals(func() (int, error) {
		return syscall.ForkExec(job.Argv[0], job.Argv, &syscall.ProcAttr{
			Dir:   job.Dir,
			Env:   job.Env,
			Files: []uintptr{devNull.Fd(), out[0], out[1]},
			Sys:   userProcessGroup(),
		})
	})
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", job.Argv[0], err)
	}
	return pid, nil
}
