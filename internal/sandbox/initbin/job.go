package initbin

import (
	"context"
	"encoding"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces/nsinit"
)

// PrepareGroup readies a sandbox's cgroup for its job: one built at
// background CPU weight gets the normal weight back, and the job's memory
// limit (bytes, when above 0) is applied. A limit below what
// the sandbox already uses becomes sandbox.ErrLimitBelowUsage, so the engine
// can fall back to a fresh sandbox.
func PrepareGroup(g *cgroups.Group, background bool, bytes int64) error {
	if g == nil {
		return nil
	}
	if background {
		if err := g.SetBackground(false); err != nil {
			return err
		}
	}
	if bytes <= 0 {
		return nil
	}
	err := g.SetMemory(bytes)
	if errors.Is(err, syscall.EBUSY) {
		return fmt.Errorf("%w: %v", sandbox.ErrLimitBelowUsage, err)
	}
	return err
}

// Drain copies the sandbox's output pipes to the job's writers (discarding
// when a writer is nil) until both pipes close; Wait it with WaitDrained.
func Drain(job sandbox.Job, stdout, stderr *os.File) *sync.WaitGroup {
	var wg sync.WaitGroup
	copyTo := func(dst io.Writer, src *os.File) {
		defer wg.Done()
		if dst == nil {
			dst = io.Discard
		}
		_, _ = io.Copy(dst, src)
	}
	wg.Add(2)
	go copyTo(job.Stdout, stdout)
	go copyTo(job.Stderr, stderr)
	return &wg
}

// WaitDrained waits for Drain to finish, at most timeout; it reports whether
// it did.
func WaitDrained(wg *sync.WaitGroup, timeout time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// JobMessage is job as init receives it.
func JobMessage(job sandbox.Job) nsinit.JobMessage {
	msg := nsinit.JobMessage{
		Argv: job.Argv, Env: job.Env, Dir: job.Dir, ReturnFiles: job.ReturnFiles,
		MaxReturnBytes: job.MaxReturnBytes, Timeout: job.Timeout,
	}
	for _, f := range job.Files {
		msg.Files = append(msg.Files, nsinit.JobFile{Path: f.Path, Data: f.Data})
	}
	return msg
}

// CloseAll closes every non-nil file, ignoring ones already closed.
func CloseAll(files ...*os.File) error {
	var errs []error
	for _, f := range files {
		if f != nil {
			if err := f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// ErrNoAnswer means init did not answer in time and its sandbox was killed.
var ErrNoAnswer = errors.New("no answer from the sandbox's init")

// DecodeStatus reads one message of at most max bytes from init's status
// pipe into v, giving up (and calling kill, which must end the sandbox so
// that the read returns) when ctx ends or timeout passes.
func DecodeStatus(ctx context.Context, status io.Reader, max int64, timeout time.Duration, v encoding.BinaryUnmarshaler, kill func()) error {
	done := make(chan error, 1)
	go func() { done <- nsinit.ReadMessage(status, max, v) }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		kill()
		<-done
		return fmt.Errorf("%w after %s", ErrNoAnswer, timeout)
	case <-ctx.Done():
		kill()
		<-done
		return ctx.Err()
	}
}
