package admission

import "container/list"

// fairQueue holds waiting tickets, one FIFO per caller, served round-robin
// across callers: one caller with many requests queued delays another by
// at most one admission per round.
type fairQueue struct {
	queues map[string]*list.List // caller -> FIFO of *Ticket
	ring   []string              // callers with a non-empty queue, in service order
	next   int                   // index into ring of the caller served next
	n      int
}

func newFairQueue() fairQueue { return fairQueue{queues: map[string]*list.List{}} }

func (q *fairQueue) len() int { return q.n }

// push queues t behind its caller's earlier tickets; a caller new to the
// ring is served after everyone already waiting.
func (q *fairQueue) push(t *Ticket) {
	l := q.queues[t.caller]
	if l == nil {
		l = list.New()
		q.queues[t.caller] = l
		if q.next == 0 {
			q.ring = append(q.ring, t.caller)
		} else {
			q.ring = append(q.ring[:q.next], append([]string{t.caller}, q.ring[q.next:]...)...)
			q.next++
		}
	}
	t.elem = l.PushBack(t)
	q.n++
}

// pop removes and returns the ticket to serve next (nil when empty).
func (q *fairQueue) pop() *Ticket {
	if q.n == 0 {
		return nil
	}
	if q.next >= len(q.ring) {
		q.next = 0
	}
	caller := q.ring[q.next]
	l := q.queues[caller]
	t := l.Remove(l.Front()).(*Ticket)
	t.elem = nil
	q.n--
	if l.Len() == 0 {
		delete(q.queues, caller)
		q.ring = append(q.ring[:q.next], q.ring[q.next+1:]...)
		// q.next now points at the caller after this one.
	} else {
		q.next++
	}
	return t
}

// peek returns the ticket pop would return, leaving it queued (nil when
// empty).
func (q *fairQueue) peek() *Ticket {
	if q.n == 0 {
		return nil
	}
	next := q.next
	if next >= len(q.ring) {
		next = 0
	}
	return q.queues[q.ring[next]].Front().Value.(*Ticket)
}

// residents returns the resident tickets waiting, in the order of service
// of their callers from the next one, each caller's in arrival order.
func (q *fairQueue) residents() []*Ticket {
	var out []*Ticket
	for i := range q.ring {
		l := q.queues[q.ring[(q.next+i)%len(q.ring)]]
		for e := l.Front(); e != nil; e = e.Next() {
			if t := e.Value.(*Ticket); t.resident {
				out = append(out, t)
			}
		}
	}
	return out
}

// remove takes t out of the queue, if it is in it.
func (q *fairQueue) remove(t *Ticket) {
	l := q.queues[t.caller]
	if l == nil || t.elem == nil {
		return
	}
	l.Remove(t.elem)
	t.elem = nil
	q.n--
	if l.Len() > 0 {
		return
	}
	delete(q.queues, t.caller)
	for i, c := range q.ring {
		if c == t.caller {
			q.ring = append(q.ring[:i], q.ring[i+1:]...)
			if i < q.next {
				q.next--
			}
			break
		}
	}
}
