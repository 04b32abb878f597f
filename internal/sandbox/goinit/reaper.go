package goinit

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// The reaper is pid 1 of the pid namespace user code runs in, inside a
// gVisor sandbox: it starts the program (or hands the job to the
// pre-started interpreter), reaps every process and, when the program has
// ended, kills what is left and reports the program's status to init. Init,
// pid 1 of the container, holds the engine's protocol, the timeout and the
// return files, from a pid namespace user code cannot name: nothing the
// program does can signal it.
//
// The reaper is as exposed as init used to be (the Sentry lets a pid
// namespace's processes signal its init), and made as hard to end: it
// catches the signals that would end a Go program (shieldFromSignals),
// keeps user code's signals, limit changes and /proc reads off itself as
// Linux keeps them off a namespace's init (shield.go), and init continues
// it when it is stopped. Should anything still end it, that ends the
// program's processes with it, as the end of a pid namespace's init does;
// init then reports that, with the return files.

// gvisorRoleReaper is the reaper's role (argv[1], with GVisorInitPath as
// argv[0]); init starts it from its own image.
const gvisorRoleReaper = "gvisor-reaper"

// The reaper's descriptors. Its own stdout and stderr are /dev/null: what it
// might print (a Go crash's trace) must not reach the program's output.
const (
	reaperControlFD = 3 // init -> reaper: initproto.SetupMessage, then initproto.JobMessage
	reaperStatusFD  = 4 // reaper -> init: initproto.ReadyMessage, then initproto.ResultMessage
	reaperStdoutFD  = 5 // the program's stdout and stderr
	reaperStderrFD  = 6
)

// reaperGrace bounds the wait for the program's processes to be gone once
// the reaper is: the Sentry kills them when their pid namespace's init
// ends, but (unlike Linux) does not wait for them before reporting its end.
const reaperGrace = 3 * time.Second

// reaper is init's handle on the reaper.
type reaper struct {
	pid     int
	control *os.File                // init's end: write
	status  *os.File                // init's end: read
	tasks   *os.File                // counts the sandbox's tasks (nil: none; see countTasks)
	exited  chan syscall.WaitStatus // the reaper's end
	ended   bool
	ws      syscall.WaitStatus
}

// startReaper starts the reaper in new pid and mount namespaces, with the
// same setup as init's (it mounts its own /proc, confines itself and starts
// the pre-started interpreter), and waits until it is ready. It runs before
// init confines itself: making namespaces is refused afterwards.
func startReaper(setup initproto.SetupMessage) (*reaper, error) {
	return startReaperIn(setup, nil)
}

// startReaperIn is startReaper with join, when set, called with the
// reaper's pid before the reaper is told anything (so before it starts a
// process): a microVM's agent moves it into the guest cgroup there.
func startReaperIn(setup initproto.SetupMessage, join func(pid int) error) (*reaper, error) {
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer ctlR.Close()
	stR, stW, err := os.Pipe()
	if err != nil {
		ctlW.Close()
		return nil, err
	}
	defer stW.Close()
	devNull, err := os.Open("/dev/null")
	if err != nil {
		ctlW.Close()
		stR.Close()
		return nil, err
	}
	defer devNull.Close()
	files := []uintptr{devNull.Fd(), devNull.Fd(), devNull.Fd(), ctlR.Fd(), stW.Fd(), 1, 2}
	pid, err := syscall.ForkExec("/proc/self/exe", []string{GVisorInitPath, gvisorRoleReaper}, &syscall.ProcAttr{
		Dir:   "/",
		Env:   os.Environ(),
		Files: files,
		Sys:   &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS},
	})
	if err != nil {
		ctlW.Close()
		stR.Close()
		return nil, fmt.Errorf("start the reaper: %w", err)
	}
	r := &reaper{pid: pid, control: ctlW, status: stR, exited: make(chan syscall.WaitStatus, 1)}
	go r.keepRunning()
	if join != nil {
		if err := join(pid); err != nil {
			r.end()
			return nil, err
		}
	}
	if err := initproto.WriteMessage(r.control, setup); err != nil {
		r.end()
		return nil, fmt.Errorf("send the reaper its setup: %w", err)
	}
	var ready initproto.ReadyMessage
	if err := initproto.ReadMessage(r.status, initproto.MaxSetupBytes, &ready); err != nil {
		r.end()
		return nil, fmt.Errorf("the reaper did not start: %v", err)
	}
	if !ready.Ready {
		r.end()
		return nil, fmt.Errorf("reaper: %s", ready.Error)
	}
	return r, nil
}

// keepRunning waits for the reaper to end, continuing it whenever it is
// stopped (user code may send it SIGSTOP; init is the only one that can be
// sure to send SIGCONT).
func (r *reaper) keepRunning() {
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(r.pid, &ws, syscall.WUNTRACED, nil)
		switch {
		case err == syscall.EINTR:
		case err != nil:
			r.exited <- ws
			return
		case ws.Stopped():
			_ = syscall.Kill(r.pid, syscall.SIGCONT)
		case ws.Exited() || ws.Signaled():
			r.exited <- ws
			return
		}
	}
}

// end kills the reaper (which kills the program's processes) if it is
// still there, waits for it and, a while, for the rest of its pid
// namespace. It may be called more than once.
func (r *reaper) end() {
	if r.ended {
		return
	}
	r.ended = true
	_ = syscall.Kill(r.pid, syscall.SIGKILL)
	r.ws = <-r.exited
	r.control.Close()
	r.status.Close()
	if !inGuest {
		waitAlone(reaperGrace)
	}
}

// waitAlone waits, up to grace, until init is the only process left in the
// container's pid namespace.
func waitAlone(grace time.Duration) {
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return
		}
		others := false
		for _, e := range entries {
			if pid, err := strconv.Atoi(e.Name()); err == nil && pid != os.Getpid() {
				others = true
				break
			}
		}
		if !others {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// runJob stages the job's files, has the reaper run the program, enforces
// the timeout, and collects the return files once every process of the
// program is gone.
func (r *reaper) runJob(job initproto.JobMessage) initproto.ResultMessage {
	res := initproto.ResultMessage{Files: map[string][]byte{}}
	if err := writeFiles(job.Files); err != nil {
		r.end()
		res.Error = err.Error()
		return res
	}
	start := time.Now()
	// The reaper needs the command line only: files are written, and
	// return files are read here.
	_ = initproto.WriteMessage(r.control, initproto.JobMessage{Argv: job.Argv, Env: job.Env, Dir: job.Dir, Timeout: job.Timeout})
	r.control.Close()
	watch := watchTasks(r.tasks)
	reported := make(chan *initproto.ResultMessage, 1)
	go func() {
		var m initproto.ResultMessage
		if err := initproto.ReadMessage(r.status, maxReaperResult, &m); err != nil {
			reported <- nil
			return
		}
		reported <- &m
	}()
	timer := time.NewTimer(job.Timeout)
	var got *initproto.ResultMessage
	select {
	case got = <-reported:
		timer.Stop()
	case <-timer.C:
		res.TimedOut = true
	}
	res.ProcessLimitHit = watch.finish()
	r.end()
	switch {
	case res.TimedOut:
		res.Started = true
		res.Signal = int(syscall.SIGKILL)
		res.ExitCode = 128 + res.Signal
		res.Duration = time.Since(start)
	case got != nil && !got.Started:
		res.Error = got.Error
		return res
	case got != nil:
		res.Started, res.ExitCode, res.Signal, res.Duration = true, got.ExitCode, got.Signal, got.Duration
	default:
		// The reaper ended before the program did: killed or crashed by
		// user code. Its pid namespace went with it.
		res.Started = true
		res.Signal = int(syscall.SIGKILL)
		res.ExitCode = 128 + res.Signal
		res.Duration = time.Since(start)
		res.Notes = append(res.Notes, fmt.Sprintf("The program ended pid 1 of its processes (%s), which ended every process of the program; its own exit status is lost.", describeEnd(r.ws)))
	}
	files, notes := collectFiles(job.ReturnFiles, job.MaxReturnBytes)
	res.Files, res.Notes = files, append(res.Notes, notes...)
	return res
}

// maxReaperResult bounds the reaper's result, which carries no files.
const maxReaperResult = 1 << 20

// describeEnd says how a process ended.
func describeEnd(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return fmt.Sprintf("signal %d", ws.Signal())
	}
	return fmt.Sprintf("exit status %d", ws.ExitStatus())
}

// runReaper is the reaper's side (see the top of this file).
func runReaper() int {
	shieldFromSignals()
	_ = unix.CloseRange(reaperStderrFD+1, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	for fd := reaperControlFD; fd <= reaperStderrFD; fd++ {
		unix.CloseOnExec(fd)
	}
	control := os.NewFile(reaperControlFD, "control")
	status := os.NewFile(reaperStatusFD, "status")
	var setup initproto.SetupMessage
	if err := initproto.ReadMessage(control, initproto.MaxSetupBytes, &setup); err != nil {
		return 1
	}
	err := prepareReaper(setup)
	out := output{reaperStdoutFD, reaperStderrFD}
	var warm *prestarted
	if err == nil && setup.Prestart != nil {
		// A pre-start that fails is not fatal: the job then starts cold.
		if warm, _ = startPrestart(*setup.Prestart, out); warm != nil {
			leaveUserGroup()
		}
	}
	if !reportReady(status, err) {
		return 1
	}
	if setup.Session {
		// Keepers lead groups of their own; the reaper leaves the one it
		// was started in before any of them starts (see shield.go).
		leaveUserGroup()
		return serveReaperSession(control, status, out)
	}
	var job initproto.JobMessage
	if err := initproto.ReadMessage(control, initproto.MaxJobBytes, &job); err != nil {
		return 0 // init ended us unused
	}
	control.Close()
	_ = initproto.WriteMessage(status, runProgram(job, warm, out))
	return 0
}

// prepareReaper gives the reaper's pid namespace its own /proc (the one
// runsc mounted shows init's namespace), hidden and frozen where init's is,
// shields the reaper from user code (shield.go) and confines it as init
// confines itself.
func prepareReaper(setup initproto.SetupMessage) error {
	// Nothing mounted here may reach init's mount namespace.
	if err := mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return err
	}
	if err := mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return err
	}
	if err := maskProc("/", setup); err != nil {
		return err
	}
	shield, err := shieldReaper("/")
	if err != nil {
		return err
	}
	if err := lockDownGVisor(setup); err != nil {
		return err
	}
	return installShield(shield)
}

// runProgram runs the job's program (handing it to the pre-started
// interpreter when there is one), reaps every process until the program
// has ended, and then kills what it left behind, so that nothing can
// change the return files after it.
func runProgram(job initproto.JobMessage, warm *prestarted, out output) initproto.ResultMessage {
	start := time.Now()
	pid, err := warm.deliver(job)
	if err != nil {
		// No (live) pre-started interpreter: start the program cold.
		if pid, err = startCold(job, out); err == nil {
			leaveUserGroup()
		}
	}
	if err != nil {
		return initproto.ResultMessage{Error: err.Error()}
	}
	status := reapUntil(pid)
	res := initproto.ResultMessage{Started: true, Duration: time.Since(start)}
	_ = syscall.Kill(-1, syscall.SIGKILL)
	reapAll()
	setStatus(&res, status)
	return res
}
