package goinit

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// The reaper's side of a session: init sends it Requests (a job, a cancel
// of the job in flight, the end) and it answers each job with a
// ResultMessage carrying Started, the program's end, Separated and Left.
// Each job runs under a keeper (keeper.go). The reaper waits in poll(2)
// on one thread: a goroutine blocked in a read could make the runtime
// start a thread the shield does not cover (shield.go).

// serveReaperSession runs the session's jobs until init ends it.
func serveReaperSession(control, status *os.File, out output) int {
	// Opened before any user code runs: what a job later mounts cannot
	// hide a process from the walks.
	proc, err := unix.Open("/proc", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return endReaperSession()
	}
	for {
		// Keepers that are done, and orphans of killed keepers.
		for {
			got, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if got <= 0 && err != syscall.EINTR {
				break
			}
		}
		var q initproto.Request
		if err := initproto.ReadMessage(control, initproto.MaxJobBytes, &q); err != nil {
			return endReaperSession()
		}
		switch q.Kind {
		case initproto.RequestJob:
			if q.Job.Resident != nil {
				_ = initproto.WriteMessage(status, residentJob(q.Job, control, proc, out))
				continue
			}
			_ = initproto.WriteMessage(status, keepJob(q.Job, control, proc, out))
		case initproto.RequestCancel:
			// Its job has already reported.
		default:
			return endReaperSession()
		}
	}
}

// endReaperSession kills every process of the session and returns the
// reaper's exit code.
func endReaperSession() int {
	_ = syscall.Kill(-1, syscall.SIGKILL)
	reapAll()
	return 0
}

// keepJob runs one job under a keeper and waits for its end or init's
// cancel, which kills the keeper's descendants (separate).
func keepJob(job initproto.JobMessage, control *os.File, proc int, out output) initproto.ResultMessage {
	keeper, report, err := startKeeper(job, out)
	if err != nil {
		return initproto.ResultMessage{Error: err.Error()}
	}
	defer report.Close()
	start := time.Now()
	var rep initproto.ResultMessage
	reported, lost, stop := false, false, false
	for !reported && !lost && !stop {
		fds := []unix.PollFd{{Fd: int32(report.Fd()), Events: unix.POLLIN}, {Fd: int32(control.Fd()), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil {
			continue
		}
		if fds[0].Revents != 0 {
			if err := initproto.ReadMessage(report, maxReaperResult, &rep); err == nil {
				reported = true
			} else {
				lost = true
			}
		}
		if !reported && !lost && fds[1].Revents != 0 {
			// Only a cancel may come while a job runs; anything else
			// ends the session.
			var q initproto.Request
			if err := initproto.ReadMessage(control, initproto.MaxJobBytes, &q); err != nil || q.Kind != initproto.RequestCancel {
				os.Exit(endReaperSession())
			}
			stop = true
		}
	}
	if reported && !rep.Started {
		_, _ = syscall.Wait4(keeper, nil, 0, nil)
		return initproto.ResultMessage{Error: rep.Error}
	}
	res := initproto.ResultMessage{Started: true}
	switch {
	case stop:
		res.Separated = separate(proc, keeper, report, &rep, &reported)
		res.Duration = time.Since(start)
		if !reported {
			rep.Signal, rep.ExitCode = int(syscall.SIGKILL), 128+int(syscall.SIGKILL)
		}
	case lost:
		// The job killed its own keeper: its processes reparented to the
		// reaper, among the session's, and its end is unknown.
		res.Duration = time.Since(start)
		rep.Signal, rep.ExitCode = int(syscall.SIGKILL), 128+int(syscall.SIGKILL)
		res.Notes = append(res.Notes, "The call's keeper process was killed, so its processes could not be told apart from the session's.")
	default:
		res.Duration = rep.Duration
		res.Separated = true
		res.Left = uint64(descendants(proc, keeper, 0))
	}
	res.ExitCode, res.Signal = rep.ExitCode, rep.Signal
	return res
}

// startKeeper starts a job's keeper, in a process group of its own, and
// hands it the job. It returns the keeper's pid and the read end of its
// report.
func startKeeper(job initproto.JobMessage, out output) (int, *os.File, error) {
	var jobPipe, reportPipe [2]int
	if err := unix.Pipe2(jobPipe[:], unix.O_CLOEXEC); err != nil {
		return 0, nil, fmt.Errorf("start the job's keeper: %w", err)
	}
	if err := unix.Pipe2(reportPipe[:], unix.O_CLOEXEC); err != nil {
		unix.Close(jobPipe[0])
		unix.Close(jobPipe[1])
		return 0, nil, fmt.Errorf("start the job's keeper: %w", err)
	}
	// Blocking descriptors (not os.Pipe's): nothing of the reaper may wait
	// in the runtime's poller, on a thread of its own.
	jobW := os.NewFile(uintptr(jobPipe[1]), "job")
	report := os.NewFile(uintptr(reportPipe[0]), "report")
	defer jobW.Close()
	null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(jobPipe[0])
		unix.Close(reportPipe[1])
		report.Close()
		return 0, nil, fmt.Errorf("start the job's keeper: %w", err)
	}
	files := []uintptr{uintptr(null), uintptr(null), uintptr(null), uintptr(jobPipe[0]), uintptr(reportPipe[1]), out[0], out[1]}
	pid, err := syscall.ForkExec("/proc/self/exe", []string{GVisorInitPath, gvisorRoleKeeper}, &syscall.ProcAttr{
		Dir:   "/",
		Env:   os.Environ(),
		Files: files,
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	unix.Close(null)
	unix.Close(jobPipe[0])
	unix.Close(reportPipe[1])
	if err != nil {
		report.Close()
		return 0, nil, fmt.Errorf("start the job's keeper: %w", err)
	}
	if err := initproto.WriteMessage(jobW, job); err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		_, _ = syscall.Wait4(pid, nil, 0, nil)
		report.Close()
		return 0, nil, fmt.Errorf("hand the job to its keeper: %w", err)
	}
	return pid, report, nil
}

// separate kills the keeper's descendants until the keeper, with nothing
// left to reap, exits (its report hangs up), at most
// initproto.SeparateWithin; true when it did. rep gets the keeper's report
// if it comes meanwhile.
func separate(proc, keeper int, report *os.File, rep *initproto.ResultMessage, reported *bool) bool {
	deadline := time.Now().Add(initproto.SeparateWithin)
	for {
		descendants(proc, keeper, syscall.SIGKILL)
		// A keeper user code stopped would reap nothing.
		_ = syscall.Kill(keeper, syscall.SIGCONT)
		fds := []unix.PollFd{{Fd: int32(report.Fd()), Events: unix.POLLIN}}
		if n, _ := unix.Poll(fds, 10); n > 0 {
			if !*reported {
				if err := initproto.ReadMessage(report, maxReaperResult, rep); err != nil {
					return true // hung up: the keeper has reaped everything
				}
				*reported = true
			} else if hungUp(report) {
				return true
			}
		}
		if !time.Now().Before(deadline) {
			return false
		}
	}
}

// hungUp reads what is left of a report that poll found readable: the
// keeper says nothing after its report, so any read is its end.
func hungUp(report *os.File) bool {
	var b [64]byte
	n, err := unix.Read(int(report.Fd()), b[:])
	return n == 0 || (err != nil && !errors.Is(err, unix.EINTR))
}

// maxWalk bounds one walk of /proc: far above any sandbox's process limit.
const maxWalk = 65536

// descendants walks /proc (proc, opened before user code ran) and sends
// sig to every descendant of keeper (sig 0: only counts them). It returns
// how many it found.
func descendants(proc, keeper int, sig syscall.Signal) int {
	parents := processParents(proc)
	mine := map[int]bool{keeper: true}
	// Mark descendants until a pass adds none: a tree at most len deep.
	for changed := true; changed; {
		changed = false
		for pid, ppid := range parents {
			if !mine[pid] && mine[ppid] {
				mine[pid], changed = true, true
			}
		}
	}
	found := 0
	for pid := range mine {
		if pid == keeper {
			continue
		}
		found++
		if sig != 0 {
			_ = syscall.Kill(pid, sig)
		}
	}
	return found
}

// processParents maps each process /proc lists (but pid 1) to its parent.
func processParents(proc int) map[int]int {
	parents := map[int]int{}
	fd, err := unix.Openat(proc, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return parents
	}
	dir := os.NewFile(uintptr(fd), "/proc")
	defer dir.Close()
	names, _ := dir.Readdirnames(maxWalk)
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 1 {
			continue
		}
		if ppid, ok := parentOf(proc, name); ok {
			parents[pid] = ppid
		}
	}
	return parents
}

// parentOf reads a process's parent from /proc/<pid>/stat.
func parentOf(proc int, pid string) (int, bool) {
	fd, err := unix.Openat(proc, pid+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	var b [512]byte
	n, _ := unix.Read(fd, b[:])
	unix.Close(fd)
	if n <= 0 {
		return 0, false
	}
	// "pid (comm) state ppid ...": comm may hold anything but ends at the
	// last parenthesis.
	text := string(b[:n])
	paren := strings.LastIndexByte(text, ')')
	if paren < 0 {
		return 0, false
	}
	fields := strings.Fields(text[paren+1:])
	if len(fields) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(fields[1])
	return ppid, err == nil
}
