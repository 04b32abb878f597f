package engine

import (
	"cmp"
	"slices"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// sweeper ends, every cfg.Sweep until the engine closes, the sessions
// past their idle TTL or lifetime and those whose sandbox stopped.
func (r *sessions) sweeper() {
	defer r.wg.Done()
	tick := time.NewTicker(r.cfg.Sweep)
	defer tick.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-tick.C:
			r.sweep()
		}
	}
}

// sweep ends what is due now: a session past its lifetime whatever it
// does (its running call is cancelled and says so), an idle one past its
// idle TTL or with its sandbox gone; and it forgets tombstones older than
// any session's lifetime plus an hour.
func (r *sessions) sweep() {
	now := r.now()
	type due struct {
		s      *session
		reason execapi.SessionEndReason
	}
	var ends []due
	var idle []*session
	r.mu.Lock()
	for _, s := range r.byID {
		switch {
		case s.ending != "":
		case !now.Before(s.lifeEnds):
			ends = append(ends, due{s, execapi.EndMaxLifetime})
		case s.busy:
		case !now.Before(s.info.LastUsedAt.Add(s.idleTTL)):
			ends = append(ends, due{s, execapi.EndIdleTTL})
		default:
			idle = append(idle, s)
		}
	}
	keep := r.cfg.Policy.MaxLifetime + time.Hour
	for len(r.order) > 0 && now.Sub(r.tombs[r.order[0]].end.At) > keep {
		delete(r.tombs, r.order[0])
		r.order = r.order[1:]
	}
	r.mu.Unlock()
	for _, s := range idle {
		// In the session's turn (its methods are not for concurrent use);
		// one that a call took meanwhile is looked at next time.
		select {
		case s.turn <- struct{}{}:
			alive := s.ss.Alive()
			<-s.turn
			if !alive {
				ends = append(ends, due{s, execapi.EndSandboxLost})
			}
		default:
		}
	}
	for _, d := range ends {
		if r.startEnd(d.s, d.reason, d.reason != execapi.EndMaxLifetime) {
			r.finishEnd(d.s)
		}
	}
}

// evict ends idle sessions, largest first, until about need bytes are
// freed (EndMemoryPressure): admission asks when a call cannot start for
// memory and the warm pool gave back what it could. Busy sessions are
// left alone; the calls that still find no room are refused for memory.
func (r *sessions) evict(need int64) {
	type candidate struct {
		s     *session
		usage int64
	}
	var idle []candidate
	for _, s := range r.open("", true) {
		r.mu.Lock()
		busy := s.busy
		r.mu.Unlock()
		if !busy {
			idle = append(idle, candidate{s, s.l.sb.MemoryUsage()})
		}
	}
	slices.SortFunc(idle, func(a, b candidate) int { return cmp.Compare(b.usage, a.usage) })
	var freed int64
	for _, c := range idle {
		if freed >= need {
			return
		}
		if r.startEnd(c.s, execapi.EndMemoryPressure, true) {
			r.finishEnd(c.s)
			freed += c.usage
		}
	}
}
