package engine

import (
	"context"
	"errors"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// ReadSessionFile implements execapi.SessionService, between calls (it
// waits for a running one, bounded by ctx).
func (e *Engine) ReadSessionFile(ctx context.Context, ref execapi.SessionRef, path string) ([]byte, error) {
	var data []byte
	err := e.sessionFileOp(ctx, ref, func(ss sandbox.Session) error {
		// What one read may ask init for bounds the limit, whatever
		// MAX_RETURN_BYTES says; one byte more than the limit tells a
		// file of the limit's size from a bigger one.
		limit := min(e.cfg.MaxReturnBytes, initproto.MaxFileReadBytes-1)
		b, err := ss.ReadFile(ctx, path, limit+1)
		if err != nil {
			if errors.Is(err, sandbox.ErrFileRefused) && ss.Alive() {
				// Init refused this path (none, not a regular file, a
				// link out): the session itself is fine.
				return execapi.ErrSessionFileNotFound
			}
			return err
		}
		if int64(len(b)) > limit {
			return &execapi.FileTooLargeError{Path: path, Limit: limit}
		}
		data = b
		return nil
	})
	return data, err
}

// WriteSessionFile implements execapi.SessionService, between calls.
func (e *Engine) WriteSessionFile(ctx context.Context, ref execapi.SessionRef, path string, data []byte) error {
	return e.sessionFileOp(ctx, ref, func(ss sandbox.Session) error {
		return ss.WriteFile(ctx, path, data)
	})
}

// sessionFileOp runs op on the caller's session in its turn; a session
// whose sandbox stopped is ended (EndSandboxLost).
func (e *Engine) sessionFileOp(ctx context.Context, ref execapi.SessionRef, op func(sandbox.Session) error) error {
	r := e.sessions
	s, err := r.lookup(ctx, ref.ID, false)
	if err != nil {
		return err
	}
	if err := r.take(ctx, s, nil); err != nil {
		return err
	}
	err = op(s.ss)
	if errors.Is(err, sandbox.ErrSessionEnded) || !s.ss.Alive() {
		end := r.endTaken(s, execapi.EndSandboxLost)
		return &execapi.SessionEndedError{End: end}
	}
	r.give(s)
	return err
}
