package admission

import (
	"container/heap"
	"time"
)

// schedule orders the running calls by when each is next due to be looked
// at (dueLocked), so that a look costs what is due, not what runs: with
// hundreds of calls sleeping, a look reads the few due now. An entry is
// stale once its call was scheduled again (gen) or released, and is
// dropped when it comes up.
type schedule []dueEntry

type dueEntry struct {
	at  time.Time
	t   *Ticket
	gen uint32
}

func (s schedule) Len() int           { return len(s) }
func (s schedule) Less(i, j int) bool { return s[i].at.Before(s[j].at) }
func (s schedule) Swap(i, j int)      { s[i], s[j] = s[j], s[i] }
func (s *schedule) Push(x any)        { *s = append(*s, x.(dueEntry)) }
func (s *schedule) Pop() any {
	old := *s
	e := old[len(old)-1]
	old[len(old)-1] = dueEntry{}
	*s = old[:len(old)-1]
	return e
}

// scheduleLocked enters t's next look, if it has one; any earlier entry
// of t's is stale from now on.
func (c *Controller) scheduleLocked(t *Ticket) {
	t.gen++
	if t.released {
		return
	}
	if at, _, ok := c.dueLocked(t); ok {
		heap.Push(&c.due, dueEntry{at: at, t: t, gen: t.gen})
	}
}

// nextDueLocked is the earliest live entry's time (ok false: none),
// dropping the stale entries before it.
func (c *Controller) nextDueLocked() (time.Time, bool) {
	for len(c.due) > 0 {
		e := c.due[0]
		if e.gen == e.t.gen && !e.t.released {
			return e.at, true
		}
		heap.Pop(&c.due)
	}
	return time.Time{}, false
}

// takeDueLocked removes and returns the calls due by now, and the light
// ones due by now+lightSlack (read a little early, so that calls due
// about together are read in one look).
func (c *Controller) takeDueLocked(now time.Time) []*Ticket {
	var out []*Ticket
	var early []dueEntry
	for {
		at, ok := c.nextDueLocked()
		if !ok || at.After(now.Add(lightSlack)) {
			break
		}
		e := heap.Pop(&c.due).(dueEntry)
		if at.After(now) && e.t.phase != phaseLight {
			early = append(early, e)
			continue
		}
		out = append(out, e.t)
	}
	for _, e := range early {
		heap.Push(&c.due, e)
	}
	return out
}
