package goinit

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// Init's side of a session sandbox (initproto.Request), alike for gVisor's
// init and the microVM agent: it answers the engine's requests in order,
// has the reaper run each job under a keeper (session_reaper.go), holds
// the job's timeout and forwards a cancel, and does the file reads and
// writes itself, by the rules for files user code may have touched
// (safeWrite, readInRoot). It mirrors the C init's session.c.

// engineRequest is one request read from the engine, or why none came.
type engineRequest struct {
	q   initproto.Request
	err error
}

// reaperAnswerWithin bounds the wait for the reaper's answer after a
// cancel: it separates within initproto.SeparateWithin, and is killed
// (ending the session's processes) when it says nothing by then.
const reaperAnswerWithin = initproto.SeparateWithin + time.Second

// serveSession answers the engine's requests until the engine ends the
// session (an EndRequest, end of file, or what init cannot follow), and
// then ends the reaper and with it every process of the session. afterJob,
// when set, runs after each job's end and before its result is sent (the
// microVM agent reports the guest cgroup's counts there).
func (r *reaper) serveSession(control, status *os.File, afterJob func()) {
	defer r.end()
	// Opened before any user code runs: a job's links cannot change what
	// it names.
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(root)
	requests := make(chan engineRequest)
	go func() {
		for {
			var q initproto.Request
			err := initproto.ReadMessage(control, initproto.MaxJobBytes, &q)
			requests <- engineRequest{q, err}
			if err != nil {
				return
			}
		}
	}()
	for req := range requests {
		if req.err != nil {
			return
		}
		switch q := req.q; q.Kind {
		case initproto.RequestJob:
			res, goOn := r.sessionJob(root, q.Job, requests)
			if !goOn {
				return
			}
			if afterJob != nil {
				afterJob()
			}
			if initproto.WriteMessage(status, res) != nil || r.ended {
				return
			}
		case initproto.RequestFileRead:
			var m initproto.FileMessage
			data, err := readInRoot(root, q.Path, q.Max)
			if err != nil {
				m.Error = fmt.Sprintf("%s: %v", q.Path, err)
			} else {
				m.Data = data
			}
			if initproto.WriteMessage(status, m) != nil {
				return
			}
		case initproto.RequestFileWrite:
			var m initproto.FileMessage
			if err := safeWrite(root, q.Path, q.Data); err != nil {
				m.Error = err.Error()
			}
			if initproto.WriteMessage(status, m) != nil {
				return
			}
		case initproto.RequestCancel:
			// Its job has already reported.
		default:
			return
		}
	}
}

// sessionJob writes the job's files, has the reaper run it, enforces the
// timeout and forwards the engine's cancel, and collects the return files.
// goOn is false when the session must end without an answer (the engine
// sent, while the job ran, something other than a cancel).
func (r *reaper) sessionJob(root int, job initproto.JobMessage, requests <-chan engineRequest) (res initproto.ResultMessage, goOn bool) {
	res = initproto.ResultMessage{Files: map[string][]byte{}}
	for _, f := range job.Files {
		if err := safeWrite(root, f.Path, f.Data); err != nil {
			res.Error = err.Error()
			return res, true
		}
	}
	start := time.Now()
	// The reaper needs the command line only: files are written, and
	// return files are read here.
	run := initproto.Request{Kind: initproto.RequestJob, Job: initproto.JobMessage{Argv: job.Argv, Env: job.Env, Dir: job.Dir, Timeout: job.Timeout, Resident: job.Resident}}
	// A kernel has its interrupt's grace after the cancel.
	answerWithin := reaperAnswerWithin
	if job.Resident != nil {
		answerWithin += max(job.Resident.Interrupt, 0)
	}
	if err := initproto.WriteMessage(r.control, run); err != nil {
		r.end()
		res.Error = "hand the job to the session's reaper: " + err.Error()
		return res, true
	}
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
	defer timer.Stop()
	var got *initproto.ResultMessage
	stopped := false
	select {
	case got = <-reported:
	case <-timer.C:
		stopped = true
	case req := <-requests:
		if req.err != nil || req.q.Kind != initproto.RequestCancel {
			return res, false
		}
		stopped = true
	}
	res.ProcessLimitHit = watch.finish()
	if stopped {
		res.TimedOut = true
		if initproto.WriteMessage(r.control, initproto.Request{Kind: initproto.RequestCancel}) == nil {
			select {
			case got = <-reported:
			case <-time.After(answerWithin):
			}
		}
		if got == nil {
			// The reaper could not separate the job and did not say so:
			// the session's processes end with it.
			r.end()
			<-reported
		}
	}
	switch {
	case got == nil:
		res.Started = true
		res.Signal = int(syscall.SIGKILL)
		res.ExitCode = 128 + res.Signal
		res.Duration = time.Since(start)
		// Its kernel, if it had one, went with the reaper.
		res.ResidentLost = job.Resident != nil
		if !stopped {
			r.end()
			res.Notes = append(res.Notes, fmt.Sprintf("The program ended pid 1 of its processes (%s), which ended every process of the session; its own exit status is lost.", describeEnd(r.ws)))
		}
	case !got.Started:
		res.Error = got.Error
		return res, true
	default:
		res.Started, res.ExitCode, res.Signal, res.Duration = true, got.ExitCode, got.Signal, got.Duration
		res.Separated, res.Left, res.Notes = got.Separated, got.Left, append(res.Notes, got.Notes...)
		res.ResidentStarted, res.ResidentLost = got.ResidentStarted, got.ResidentLost
		if stopped {
			res.Duration = time.Since(start)
		}
	}
	files, notes := collectFiles(job.ReturnFiles, job.MaxReturnBytes)
	res.Files, res.Notes = files, append(res.Notes, notes...)
	return res, true
}
