package frontend

import (
	"sync"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/execapi"
)

// maxEnded bounds the ended sessions a front end remembers (the oldest
// are forgotten first): a session forgotten here reads as lost with its
// worker, which is still true, only less precise.
const maxEnded = 4096

// endedSessions are the sessions workers ended as they stopped, by the
// hash of their id, so that each one's next call is told how it ended
// (its worker is gone from the registry by then). Safe for concurrent use.
type endedSessions struct {
	mu    sync.Mutex
	m     map[string]cluster.EndedSession
	order []string
}

// add remembers what a registration says its worker ended.
func (e *endedSessions) add(list []cluster.EndedSession) {
	if len(list) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[string]cluster.EndedSession{}
	}
	for _, s := range list {
		if _, ok := e.m[s.IDHash]; !ok {
			e.order = append(e.order, s.IDHash)
		}
		e.m[s.IDHash] = s
	}
	for len(e.order) > maxEnded {
		delete(e.m, e.order[0])
		e.order = e.order[1:]
	}
}

// lookup is how session id ended, when its worker said it ended it and
// caller owns it (any caller when admin).
func (e *endedSessions) lookup(id, caller string, admin bool) (execapi.SessionEnd, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.m[cluster.HashSessionID(id)]
	if !ok || !admin && s.CallerHash != cluster.HashSessionID(caller) {
		return execapi.SessionEnd{}, false
	}
	return execapi.SessionEnd{Reason: s.Reason, At: s.At, StatePurged: s.Purged}, true
}
