package engine

import (
	"context"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// Session implements execapi.SessionService: the caller's open session
// as ListSessions lists it. One that is ending is not open (ListSessions
// leaves it out): its end is waited for and answered as its next use's
// would be, so that a front end never validates a call against a session
// that is gone by the time the call comes.
func (e *Engine) Session(ctx context.Context, ref execapi.SessionRef) (execapi.SessionInfo, error) {
	r := e.sessions
	s, err := r.lookup(ctx, ref.ID, false)
	if err != nil {
		return execapi.SessionInfo{}, err
	}
	r.mu.Lock()
	ending := s.ending != ""
	r.mu.Unlock()
	if ending {
		select {
		case <-s.done:
			return execapi.SessionInfo{}, &execapi.SessionEndedError{End: s.end}
		case <-ctx.Done():
			return execapi.SessionInfo{}, context.Cause(ctx)
		}
	}
	return r.snapshot(s), nil
}
