package frontend

import (
	"slices"
	"sync"
)

// waitLine orders the calls of a front end that wait for a worker with
// room. Without it a call that backs off after every worker refused loses
// each freed sandbox to the calls that arrive meanwhile (a client's next
// call, sent the moment its last one ended, takes the very sandbox that
// call freed) and can be refused after the whole queue wait while later
// calls run. So a call that arrives while others wait joins the line
// instead of trying first, and the oldest in line tries most often. A call
// steps out of the line while it tries workers and back in, in its place,
// when they refused: a call placed is out of it for good.
// (Across front ends each line is its own: they share only the workers.)
type waitLine struct {
	mu      sync.Mutex
	last    uint64
	waiting []uint64 // tickets in order of arrival
}

// join puts a call in the line and returns its ticket: a new one at the
// end for ticket 0, else the call's place by its ticket.
func (l *waitLine) join(ticket uint64) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ticket == 0 {
		l.last++
		ticket = l.last
	}
	if i, found := slices.BinarySearch(l.waiting, ticket); !found {
		l.waiting = slices.Insert(l.waiting, i, ticket)
	}
	return ticket
}

// leave takes a ticket out of the line (placed, refused or gone); a
// ticket of 0 or one already out is ignored.
func (l *waitLine) leave(ticket uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i, found := slices.BinarySearch(l.waiting, ticket); found {
		l.waiting = slices.Delete(l.waiting, i, i+1)
	}
}

// first says whether ticket is the oldest in line.
func (l *waitLine) first(ticket uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiting) > 0 && l.waiting[0] == ticket
}

// len is how many calls wait.
func (l *waitLine) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiting)
}
