package sessionrecord

import (
	"context"
	"fmt"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// expiredRowMargin is how long past its expiry an open row still holds a
// place in its key's count.
const expiredRowMargin = 5 * time.Minute

// roomForKey refuses a session the caller's key may not open: in a
// cluster (Config.Cluster) no worker can count a key's sessions, since each
// holds only its own, so the rows every front end shares do. On one
// machine the engine counts them, and this does nothing.
func (r *Recorder) roomForKey(ctx context.Context, beyond int) error {
	perKey := r.inner.SessionPolicy().PerKey
	if !r.cfg.Cluster || perKey <= 0 {
		return nil
	}
	open, err := r.rows.OpenCodeSessions(ctx, execapi.CallerFrom(ctx), false)
	if err != nil {
		return fmt.Errorf("count the key's sessions: %w", err)
	}
	// A row well past its expiry is a session that ended unseen (its front
	// end gone before it could record the end): it holds no place. The
	// margin covers a call still running past the expiry its row was
	// given when the last call ended.
	now, live := r.cfg.now(), 0
	for _, row := range open {
		if row.Expires.Add(expiredRowMargin).After(now) {
			live++
		}
	}
	if live > perKey-beyond {
		return &execapi.Refusal{Reason: execapi.RefusedKeySessions, Limit: perKey}
	}
	return nil
}

// openCounted opens a session through open within the key's maximum: a
// count before (so that a key at its maximum starts no sandbox) and one
// after its row is written, since two front ends may count at once; the
// later one over the maximum closes its session again and is refused (at
// worst both are, and the caller retries: never more than the maximum).
func (r *Recorder) openCounted(ctx context.Context, open func() (execapi.SessionInfo, error)) (execapi.SessionInfo, error) {
	if err := r.roomForKey(ctx, 1); err != nil {
		return execapi.SessionInfo{}, err
	}
	info, err := open()
	if err != nil {
		return info, err
	}
	info, err = r.record(ctx, info)
	if err != nil {
		return info, err
	}
	if err := r.roomForKey(ctx, 0); err != nil {
		ref := execapi.SessionRef{ID: info.ID, Worker: info.Worker}
		if _, cerr := r.CloseSession(context.WithoutCancel(ctx), ref); cerr != nil {
			r.log.Warn("close a session opened past its key's maximum", "err", cerr)
		}
		return execapi.SessionInfo{}, err
	}
	return info, nil
}
