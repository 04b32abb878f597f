package hostside

import (
	"errors"
	"os"
)

// Pipes are the four pipes between the engine and a sandbox's init: its
// control and status descriptors (initproto.ControlFD and StatusFD) and its
// stdout and stderr, which go straight to the engine so that output streams
// without passing through init.
type Pipes struct {
	// The engine's ends: it writes Control and reads the others.
	Control, Status, Stdout, Stderr *os.File
	// The init's ends, for whatever starts it: ChildControl becomes its
	// fd 3, ChildStatus its fd 4, ChildStdout and ChildStderr its fds 1
	// and 2. CloseChildEnds closes them once the child holds its copies.
	ChildControl, ChildStatus, ChildStdout, ChildStderr *os.File
}

// NewPipes makes the four pipes; on error nothing is left open.
func NewPipes() (*Pipes, error) {
	var p Pipes
	pairs := []struct{ engine, child **os.File }{
		{&p.Control, &p.ChildControl}, {&p.Status, &p.ChildStatus},
		{&p.Stdout, &p.ChildStdout}, {&p.Stderr, &p.ChildStderr},
	}
	for i, pair := range pairs {
		r, w, err := os.Pipe()
		if err != nil {
			p.close()
			return nil, err
		}
		// The engine writes control and reads the rest.
		if i == 0 {
			*pair.engine, *pair.child = w, r
		} else {
			*pair.engine, *pair.child = r, w
		}
	}
	return &p, nil
}

// CloseChildEnds closes the init's ends: call it once the child holds its
// own copies (or failed to start), so that a pipe ends when its other side
// is gone.
func (p *Pipes) CloseChildEnds() {
	_ = CloseAll(p.ChildControl, p.ChildStatus, p.ChildStdout, p.ChildStderr)
	p.ChildControl, p.ChildStatus, p.ChildStdout, p.ChildStderr = nil, nil, nil, nil
}

// close closes every end still open.
func (p *Pipes) close() error {
	p.CloseChildEnds()
	err := CloseAll(p.Control, p.Status, p.Stdout, p.Stderr)
	p.Control, p.Status, p.Stdout, p.Stderr = nil, nil, nil, nil
	return err
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
