package goinit

import (
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// A session's job runs under a keeper, a process the reaper starts for it
// from its own image: a child subreaper, so that whatever the job starts,
// however it detaches (setsid, double forks), reparents to the keeper and
// not to the reaper. The job's whole process tree is then the keeper's
// descendants, which a timeout or cancel kills without touching the
// session's other processes (session_reaper.go). A job that ends normally
// keeps its background processes: the keeper stays to reap them and exits
// when none is left. It is the C init's keeper (session.c), in Go.

// gvisorRoleKeeper is the keeper's role (argv[1], with GVisorInitPath as
// argv[0]).
const gvisorRoleKeeper = "gvisor-keeper"

// The keeper's descriptors are the reaper's (reaperControlFD: the job,
// reaperStatusFD: its report, reaperStdoutFD and reaperStderrFD: the
// program's output). The report is a ResultMessage: Started false with
// Error, or how the program ended; the descriptor stays open until the
// keeper exits, so its hang-up tells the reaper the job's tree is gone.

// runKeeper is the keeper's side.
func runKeeper() int {
	shieldFromSignals()
	_ = unix.CloseRange(reaperStderrFD+1, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	for fd := reaperControlFD; fd <= reaperStderrFD; fd++ {
		unix.CloseOnExec(fd)
	}
	control := os.NewFile(reaperControlFD, "job")
	report := os.NewFile(reaperStatusFD, "report")
	var job initproto.JobMessage
	if err := initproto.ReadMessage(control, initproto.MaxJobBytes, &job); err != nil {
		return 1
	}
	control.Close()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		_ = initproto.WriteMessage(report, initproto.ResultMessage{Error: "make the job's keeper a subreaper: " + err.Error()})
		return 0
	}
	// The keeper leads a group of its own (the reaper started it so) and
	// the program starts in it, as the C init's does: the program is then
	// no group's leader and may start a session (setsid). A signal to that
	// group ends the keeper too, which the reaper reports (the job's
	// processes can then no longer be told apart, and the session ends).
	start := time.Now()
	pid, err := startCold(job, output{reaperStdoutFD, reaperStderrFD})
	if err != nil {
		_ = initproto.WriteMessage(report, initproto.ResultMessage{Error: err.Error()})
		return 0
	}
	status := reapUntil(pid)
	res := initproto.ResultMessage{Started: true, Duration: time.Since(start)}
	setStatus(&res, status)
	_ = initproto.WriteMessage(report, res)
	reapAll()
	return 0
}

// setStatus fills res's exit code and signal from how a process ended.
func setStatus(res *initproto.ResultMessage, status syscall.WaitStatus) {
	if status.Signaled() {
		res.Signal = int(status.Signal())
		res.ExitCode = 128 + res.Signal
	} else {
		res.ExitCode = status.ExitStatus()
	}
}
