package worker

import (
	"context"
	"time"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/execapi"
)

// endSessionsWait bounds how long a stopping worker spends ending its
// sessions (each a sandbox's teardown).
const endSessionsWait = 30 * time.Second

// endSessions ends every session the worker holds, as it stops: a session
// lives on one worker and never outlives it, and its next call is told it
// ended with the server (EndServerShutdown) rather than meet a new one.
// It reports whether any ended (the registration then says which).
func (w *Worker) endSessions() bool {
	admin, ok := w.cfg.Sessions.(execapi.SessionAdmin)
	if !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), endSessionsWait)
	defer cancel()
	all, err := admin.AllSessions(ctx)
	if err != nil {
		w.log.Error("sessions not listed as the worker stops; the engine's close ends them", "err", err)
		return false
	}
	var ended []cluster.EndedSession
	for _, s := range all {
		end, err := admin.EndSession(ctx, execapi.SessionRef{ID: s.ID})
		if err != nil {
			w.log.Warn("a session not ended as the worker stops", "err", err)
			continue
		}
		if len(ended) < cluster.MaxEndedSessions {
			ended = append(ended, cluster.EndedSession{IDHash: cluster.HashSessionID(s.ID), CallerHash: cluster.HashSessionID(s.Owner),
				Reason: execapi.EndServerShutdown, At: end.At, Purged: end.StatePurged})
		}
	}
	w.mu.Lock()
	w.ended = ended
	w.mu.Unlock()
	return len(ended) > 0
}
