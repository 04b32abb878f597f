package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// ErrLost is what Run reports for every call after a kernel was lost: the
// caller must kill it and start another.
var ErrLost = errors.New("kernel: lost")

// Outcome is how one cell ended.
type Outcome struct {
	// Status is the cell's exit status (0-255); meaningless when Lost.
	Status int
	// Interrupted says the call's context ended while the cell ran and the
	// kernel was sent its interrupt (SIGINT). A kernel that answered in time
	// lives on; its Status says how the cell took it (130 when it did not
	// catch the interrupt).
	Interrupted bool
	// Lost says the kernel gave no valid reply: it ended (os._exit, a crash,
	// process.exit), broke the frame, or did not answer its interrupt within
	// the grace. Its variables are gone; the caller kills what is left of it
	// and the session's next call starts a new one. Err says which.
	Lost bool
	Err  error
}

// Driver feeds one kernel its cells, one at a time (it is not safe for
// concurrent calls). It holds only the kernel's pipes and a way to
// interrupt it; starting, killing and the kernel's output are the
// caller's (init's, in a sandbox), so one driver serves any level.
type Driver struct {
	requests  io.Writer
	replies   io.Reader
	interrupt func() error
	grace     time.Duration
	lost      error
}

// NewDriver returns a driver writing cells to requests (the kernel's fd 3)
// and reading replies from replies (its fd 4). interrupt sends the kernel
// SIGINT; grace is how long an interrupted kernel has to answer before it
// counts as lost.
func NewDriver(requests io.Writer, replies io.Reader, interrupt func() error, grace time.Duration) *Driver {
	return &Driver{requests: requests, replies: replies, interrupt: interrupt, grace: grace}
}

// Run sends one cell (see Request) and waits for its reply. When ctx ends
// first, the kernel is interrupted and has the grace to answer.
func (d *Driver) Run(ctx context.Context, dir, path string, env []string) Outcome {
	if d.lost != nil {
		return Outcome{Lost: true, Err: fmt.Errorf("%w: %w", ErrLost, d.lost)}
	}
	type answer struct {
		status int
		err    error
	}
	// One goroutine writes and reads, so a kernel that stopped reading its
	// fd 3 cannot hold Run past ctx either. After a loss it ends when the
	// caller kills the kernel (its pipes then give EOF or EPIPE).
	done := make(chan answer, 1)
	frame := Request(dir, path, env)
	go func() {
		if _, err := d.requests.Write(frame); err != nil {
			done <- answer{err: err}
			return
		}
		status, err := ReadReply(d.replies)
		done <- answer{status, err}
	}()
	var out Outcome
	var a answer
	select {
	case a = <-done:
	case <-ctx.Done():
		out.Interrupted = true
		if err := d.interrupt(); err != nil {
			a.err = fmt.Errorf("interrupt: %w", err)
			break
		}
		grace := time.NewTimer(d.grace)
		select {
		case a = <-done:
		case <-grace.C:
			a.err = fmt.Errorf("no answer to the interrupt within %v", d.grace)
		}
		grace.Stop()
	}
	if a.err != nil {
		d.lost = a.err
		out.Lost, out.Err = true, a.err
		return out
	}
	out.Status = a.status
	return out
}
