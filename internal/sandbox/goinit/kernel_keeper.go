package goinit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// A session's kernel (initproto.ResidentJob) runs below a keeper of its
// own, started by the reaper as a job's keeper is, so the kernel is
// confined exactly as a job's program: whatever a cell starts stays among
// that keeper's descendants, and a kernel that must be killed is killed
// with its whole tree and nothing of another job's. The keeper tells the
// reaper the kernel's pid once it runs, and its end when it ends, and
// then reaps until nothing is left. It is the C init's keep_kernel
// (kernel.c), in Go.

// gvisorRoleKernelKeeper is a kernel keeper's role (argv[1], with
// GVisorInitPath as argv[0]).
const gvisorRoleKernelKeeper = "gvisor-kernel-keeper"

// A kernel keeper's descriptors: a job keeper's (reaperControlFD: the
// kernel's command line as a JobMessage, reaperStatusFD: its reports,
// reaperStdoutFD and reaperStderrFD: the kernel's output), and the
// kernel's own pipes, which become the kernel's fds 3 and 4.
const (
	kernelRequestFD = 7 // read end: the kernel's requests
	kernelReplyFD   = 8 // write end: the kernel's replies
)

// kernelReport is one report of a kernel keeper, of a fixed size below
// PIPE_BUF so each is written and read whole: Started with Pid once the
// kernel runs (or Error), then Ended with its wait status.
type kernelReport struct {
	Started uint32
	Pid     int32
	Ended   uint32
	Status  uint32
	Error   [240]byte
}

// kernelReportSize is the size of one report on the pipe.
var kernelReportSize = binary.Size(kernelReport{})

func (r kernelReport) encode() []byte {
	var b bytes.Buffer
	_ = binary.Write(&b, binary.LittleEndian, r)
	return b.Bytes()
}

// errorText is the report's Error as a string.
func (r *kernelReport) errorText() string {
	text, _, _ := bytes.Cut(r.Error[:], []byte{0})
	return string(text)
}

// decodeKernelReport decodes one whole report.
func decodeKernelReport(b []byte) (kernelReport, error) {
	var r kernelReport
	if len(b) != kernelReportSize {
		return r, errors.New("a kernel keeper's report of the wrong size")
	}
	err := binary.Read(bytes.NewReader(b), binary.LittleEndian, &r)
	return r, err
}

// runKernelKeeper is a kernel keeper's side.
func runKernelKeeper() int {
	shieldFromSignals()
	_ = unix.CloseRange(kernelReplyFD+1, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	for fd := reaperControlFD; fd <= kernelReplyFD; fd++ {
		unix.CloseOnExec(fd)
	}
	control := os.NewFile(reaperControlFD, "kernel")
	report := os.NewFile(reaperStatusFD, "report")
	fail := func(err error) int {
		var r kernelReport
		copy(r.Error[:len(r.Error)-1], err.Error())
		_, _ = report.Write(r.encode())
		return 0
	}
	var job initproto.JobMessage
	if err := initproto.ReadMessage(control, initproto.MaxJobBytes, &job); err != nil {
		return 1
	}
	control.Close()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("make the kernel's keeper a subreaper: %w", err))
	}
	pid, err := startKernel(job)
	unix.Close(kernelRequestFD)
	unix.Close(kernelReplyFD)
	if err != nil {
		return fail(err)
	}
	if _, err := report.Write(kernelReport{Started: 1, Pid: int32(pid)}.encode()); err != nil {
		return 1
	}
	status := reapUntil(pid)
	_, _ = report.Write(kernelReport{Started: 1, Pid: int32(pid), Ended: 1, Status: uint32(status)}.encode())
	reapAll()
	return 0
}

// startKernel starts the kernel in the keeper's group with its request
// and reply pipes on its fds 3 and 4; its stdin is /dev/null.
func startKernel(job initproto.JobMessage) (int, error) {
	devNull, err := os.Open("/dev/null")
	if err != nil {
		return 0, fmt.Errorf("open /dev/null: %w", err)
	}
	defer devNull.Close()
	pid, err := startWithDefaultSignals(func() (int, error) {
		return syscall.ForkExec(job.Argv[0], job.Argv, &syscall.ProcAttr{
			Dir:   job.Dir,
			Env:   job.Env,
			Files: []uintptr{devNull.Fd(), reaperStdoutFD, reaperStderrFD, kernelRequestFD, kernelReplyFD},
		})
	})
	if err != nil {
		return 0, fmt.Errorf("start the kernel %s: %w", job.Argv[0], err)
	}
	return pid, nil
}
