package goinit

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// The reaper's side of a session's resident kernels (initproto.ResidentJob),
// as the C init's kernel.c does it: a kernel per key, started under a
// keeper of its own (kernel_keeper.go) when none of the job's key runs;
// the job's Request written to its fd 3, and at most one strict reply
// frame read from its fd 4. Init holds the job's timeout and sends a
// cancel at it (session.go): the kernel then gets a SIGINT and the job's
// Interrupt to answer, after which it is lost, killed with its whole tree.
//
// What the kernel writes is untrusted (user code runs in it). Its pipes
// are non-blocking on the reaper's side and waited on in poll(2), on the
// reaper's one thread (see session_reaper.go).

// residentKernel is one running kernel: its keeper and pid, and the
// reaper's ends of its request pipe (its fd 3), its reply pipe (its fd 4)
// and its keeper's report pipe.
type residentKernel struct {
	key                string
	keeper, pid        int
	req, reply, report int
}

// kernels are the session's running kernels, at most initproto.MaxKernels.
var kernels []*residentKernel

func findKernel(key string) *residentKernel {
	for _, k := range kernels {
		if k.key == key {
			return k
		}
	}
	return nil
}

// Notes of a resident job's result, as the C init words them.
const (
	noteKernelBroke      = "The interpreter had ended, or written out of turn, since the last call; a new one was started."
	noteKernelKeeperGone = "The interpreter's keeper process was killed, so its processes could not be told apart from the session's."
)

// residentJob runs job on its kernel, starting one first when none of its
// key runs (or the one there broke between jobs), and reports the reply's
// status or how the kernel was lost. Only a cancel may come from init
// while it runs; anything else ends the session.
func residentJob(job initproto.JobMessage, control *os.File, proc int, out output) initproto.ResultMessage {
	r := job.Resident
	if len(r.Argv) == 0 {
		return initproto.ResultMessage{Error: "a resident job without a kernel command"}
	}
	var res initproto.ResultMessage
	k := findKernel(r.Key)
	if k != nil && !k.idle() {
		k.lose(proc)
		res.Notes = append(res.Notes, noteKernelBroke)
		k = nil
	}
	if k == nil {
		if len(kernels) == initproto.MaxKernels {
			return initproto.ResultMessage{Error: fmt.Sprintf("a session keeps at most %d interpreters", initproto.MaxKernels)}
		}
		var err error
		if k, err = startResident(*r, out); err != nil {
			return initproto.ResultMessage{Error: err.Error()}
		}
		kernels = append(kernels, k)
		res.ResidentStarted = true
	}
	res.Started = true
	start := time.Now()
	status, lost, rep, keeperGone := k.converse(r.Request, r.Interrupt, control)
	res.Duration = time.Since(start)
	if !lost {
		res.Separated = true
		res.ExitCode = status
		if n := descendants(proc, k.keeper, 0); n > 1 {
			res.Left = uint64(n - 1) // the kernel is not left of the job
		}
		return res
	}
	res.ResidentLost = true
	separated, endRep := k.lose(proc)
	if rep == nil {
		rep = endRep
	}
	res.Separated = separated && !keeperGone
	if keeperGone {
		res.Notes = append(res.Notes, noteKernelKeeperGone)
	}
	ws := syscall.WaitStatus(uint32(syscall.SIGKILL))
	if rep != nil {
		ws = syscall.WaitStatus(rep.Status)
	}
	setStatus(&res, ws)
	return res
}

// converse writes request to the kernel and reads its reply. A cancel
// from init sends the kernel a SIGINT and leaves it interrupt to answer.
// lost is true when the kernel gave no valid reply; rep is then its
// keeper's report of its end, if one came, and keeperGone says the keeper
// itself hung up.
func (k *residentKernel) converse(request []byte, interrupt time.Duration, control *os.File) (status int, lost bool, rep *kernelReport, keeperGone bool) {
	var reply [4 + initproto.MaxKernelReply]byte
	got, want, sent := 0, 4, 0
	var deadline time.Time // none until init cancels: init holds the timeout
	for {
		wait := -1
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return 0, true, nil, false
			}
			wait = int((left + time.Millisecond - 1) / time.Millisecond)
		}
		reqFd := int32(-1)
		if sent < len(request) {
			reqFd = int32(k.req)
		}
		fds := []unix.PollFd{
			{Fd: int32(k.reply), Events: unix.POLLIN},
			{Fd: int32(k.report), Events: unix.POLLIN},
			{Fd: int32(control.Fd()), Events: unix.POLLIN},
			{Fd: reqFd, Events: unix.POLLOUT},
		}
		if _, err := unix.Poll(fds, wait); err != nil {
			continue
		}
		if fds[3].Revents != 0 {
			n, err := unix.Write(k.req, request[sent:])
			if n > 0 {
				sent += n
			} else if err != nil && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
				return 0, true, nil, false // it no longer reads its requests
			}
		}
		if fds[0].Revents != 0 {
			n, err := unix.Read(k.reply, reply[got:want])
			switch {
			case n > 0:
				got += n
				if got == 4 {
					body := int(uint32(reply[0]) | uint32(reply[1])<<8 | uint32(reply[2])<<16 | uint32(reply[3])<<24)
					if body > initproto.MaxKernelReply {
						return 0, true, nil, false
					}
					want = 4 + body
				}
				if got == want && want > 4 {
					s, ok := parseKernelReply(reply[4:got])
					if !ok {
						return 0, true, nil, false
					}
					return s, false, nil, false
				}
			case n == 0 || (!errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR)):
				return 0, true, nil, false
			}
		}
		if fds[1].Revents != 0 {
			// The kernel ended (its keeper reports it) or its keeper did.
			if r, ok := readKernelReport(k.report); ok {
				if r.Ended != 0 {
					return 0, true, &r, false
				}
			} else {
				return 0, true, nil, true
			}
		}
		if fds[2].Revents != 0 {
			var q initproto.Request
			if err := initproto.ReadMessage(control, initproto.MaxJobBytes, &q); err != nil || q.Kind != initproto.RequestCancel {
				os.Exit(endReaperSession())
			}
			if deadline.IsZero() {
				// The timeout or a cancel: an interrupt, and the grace to
				// answer it.
				_ = syscall.Kill(k.pid, syscall.SIGINT)
				deadline = time.Now().Add(max(interrupt, 0))
			}
		}
	}
}

// parseKernelReply decodes a reply's body, "exit=N\0" with N in 0-255
// written as strconv.Itoa writes it.
func parseKernelReply(b []byte) (int, bool) {
	n := len(b)
	if n < 7 || string(b[:5]) != "exit=" || b[n-1] != 0 {
		return 0, false
	}
	digits := b[5 : n-1]
	if len(digits) > 3 || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	v := 0
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, v <= 255
}

// readKernelReport reads one report from a keeper's non-blocking report
// pipe; false when the keeper hung up (or wrote what is not a report).
func readKernelReport(fd int) (kernelReport, bool) {
	b := make([]byte, kernelReportSize)
	for {
		n, err := unix.Read(fd, b)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if n != kernelReportSize {
			return kernelReport{}, false
		}
		r, err := decodeKernelReport(b)
		return r, err == nil
	}
}

// idle reports whether a kernel is as a finished reply left it: nothing
// on its reply pipe (an end of file is its death), no report of its end.
func (k *residentKernel) idle() bool {
	fds := []unix.PollFd{{Fd: int32(k.reply), Events: unix.POLLIN}, {Fd: int32(k.report), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return n == 0 && err == nil
}

// lose kills the kernel's whole tree and forgets it; separated is true
// when its keeper's tree emptied within initproto.SeparateWithin (the
// keeper is then reaped). rep is the kernel's end if its keeper reported
// it meanwhile.
func (k *residentKernel) lose(proc int) (separated bool, rep *kernelReport) {
	_ = syscall.Kill(k.pid, syscall.SIGKILL)
	deadline := time.Now().Add(initproto.SeparateWithin)
	for !separated {
		descendants(proc, k.keeper, syscall.SIGKILL)
		// A keeper user code stopped would reap nothing.
		_ = syscall.Kill(k.keeper, syscall.SIGCONT)
		fds := []unix.PollFd{{Fd: int32(k.report), Events: unix.POLLIN}}
		if n, _ := unix.Poll(fds, 10); n > 0 {
			r, ok := readKernelReport(k.report)
			switch {
			case !ok:
				separated = true // hung up: the keeper has reaped everything
			case r.Ended != 0:
				rep = &r
			}
		}
		if !separated && !time.Now().Before(deadline) {
			break
		}
	}
	if separated {
		_, _ = syscall.Wait4(k.keeper, nil, 0, nil)
	} else {
		// Its orphans become the reaper's, among the session's.
		_ = syscall.Kill(k.keeper, syscall.SIGKILL)
	}
	unix.Close(k.req)
	unix.Close(k.reply)
	unix.Close(k.report)
	for i, other := range kernels {
		if other == k {
			kernels = append(kernels[:i], kernels[i+1:]...)
			break
		}
	}
	return separated, rep
}

// startResident starts a kernel for r under a keeper of its own and waits
// until it runs.
func startResident(r initproto.ResidentJob, out output) (*residentKernel, error) {
	var job, report, req, reply [2]int
	pipes := []*[2]int{&job, &report, &req, &reply}
	closeAll := func() {
		for _, p := range pipes {
			if p[0] > 0 {
				unix.Close(p[0])
				unix.Close(p[1])
			}
		}
	}
	for _, p := range pipes {
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			closeAll()
			return nil, fmt.Errorf("start the kernel: pipe: %w", err)
		}
	}
	null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("start the kernel: %w", err)
	}
	files := []uintptr{uintptr(null), uintptr(null), uintptr(null), uintptr(job[0]), uintptr(report[1]), out[0], out[1], uintptr(req[0]), uintptr(reply[1])}
	keeper, err := syscall.ForkExec("/proc/self/exe", []string{GVisorInitPath, gvisorRoleKernelKeeper}, &syscall.ProcAttr{
		Dir:   "/",
		Env:   os.Environ(),
		Files: files,
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	unix.Close(null)
	for _, fd := range []int{job[0], report[1], req[0], reply[1]} {
		unix.Close(fd)
	}
	jobW, reportR, reqW, replyR := job[1], report[0], req[1], reply[0]
	closeOurs := func() {
		for _, fd := range []int{jobW, reportR, reqW, replyR} {
			unix.Close(fd)
		}
	}
	if err != nil {
		closeOurs()
		return nil, fmt.Errorf("start the kernel's keeper: %w", err)
	}
	fail := func(err error) (*residentKernel, error) {
		_ = syscall.Kill(keeper, syscall.SIGKILL)
		_, _ = syscall.Wait4(keeper, nil, 0, nil)
		closeOurs()
		return nil, err
	}
	jobFile := os.NewFile(uintptr(jobW), "kernel")
	err = initproto.WriteMessage(jobFile, initproto.JobMessage{Argv: r.Argv, Env: r.Env, Dir: r.Dir})
	jobFile.Close()
	if err != nil {
		return fail(fmt.Errorf("hand the kernel to its keeper: %w", err))
	}
	// Blocking: the keeper writes its first report right after the
	// kernel's fork, or hangs up.
	rep, ok := readKernelReport(reportR)
	switch {
	case !ok:
		return fail(errors.New("start the kernel: its keeper ended"))
	case rep.Started == 0:
		return fail(errors.New(rep.errorText()))
	}
	for _, fd := range []int{reportR, reqW, replyR} {
		if err := unix.SetNonblock(fd, true); err != nil {
			return fail(fmt.Errorf("start the kernel: %w", err))
		}
	}
	return &residentKernel{key: r.Key, keeper: keeper, pid: int(rep.Pid), req: reqW, reply: replyR, report: reportR}, nil
}
