package httpapi

import (
	"sync"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// streamBuffer is how many bytes of events a streamed run may have waiting
// for its client before chunks are coalesced (a variable so that tests can
// make it small).
var streamBuffer = 1 << 20

// pendingOverhead is what one waiting event costs beside its bytes, so
// that many one-byte chunks count for what they hold in memory.
const pendingOverhead = 64

// pendingEvent is one event waiting for the client.
type pendingEvent struct {
	kind execapi.EventKind
	data []byte
	// elapsed is the time since the server got the call.
	elapsed time.Duration
}

// eventQueue is the bounded buffer between a run's EventSink, which must
// never block (the engine calls it from the goroutines that read the
// sandbox's output, a cluster front end from the one that reads its
// worker's frames), and the handler that writes the events to a client
// that may read slower than the code writes.
//
// Nothing is ever dropped: every chunk the sink sees has already been
// counted against the run's output cap, so what can wait is bounded by the
// caps. Up to limit bytes (with pendingOverhead per event), each chunk
// waits as its own event in the order written. Beyond it a chunk joins the
// latest waiting event of its own stream: each stream's text stays in
// order and whole, the number of waiting events stops growing, and only
// the interleaving of stdout with stderr, and the size of the chunks, is
// coarser for a client that lags that far behind.
type eventQueue struct {
	limit int
	// wake has room for one signal: an event (or admission) is waiting.
	wake chan struct{}

	mu       sync.Mutex
	pending  []pendingEvent
	cost     int
	admitted bool
}

func newEventQueue(limit int) *eventQueue {
	return &eventQueue{limit: limit, wake: make(chan struct{}, 1)}
}

// push takes one event of the run; it is the run's EventSink (with the
// time since the call came), and returns at once. Admission is no event of
// the stream, only the sign that the call got past every refusal; the
// kinds the wire does not carry (submitted) are ignored.
func (q *eventQueue) push(ev execapi.Event, elapsed time.Duration) {
	q.mu.Lock()
	switch ev.Kind {
	case execapi.EventAdmitted:
		q.admitted = true
	case execapi.EventStarted:
		q.admitted = true
		q.add(pendingEvent{kind: ev.Kind, elapsed: elapsed})
	case execapi.EventStdout, execapi.EventStderr:
		q.admitted = true
		if len(ev.Data) > 0 {
			q.addChunk(ev.Kind, ev.Data, elapsed)
		}
	default:
		q.mu.Unlock()
		return
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *eventQueue) add(p pendingEvent) {
	q.pending = append(q.pending, p)
	q.cost += len(p.data) + pendingOverhead
}

// addChunk queues a chunk of output, coalesced beyond the limit.
func (q *eventQueue) addChunk(kind execapi.EventKind, data []byte, elapsed time.Duration) {
	if q.cost+len(data)+pendingOverhead > q.limit {
		for i := len(q.pending) - 1; i >= 0; i-- {
			if q.pending[i].kind == kind {
				q.pending[i].data = append(q.pending[i].data, data...)
				q.cost += len(data)
				return
			}
		}
	}
	// A copy: the sender may reuse its buffer, and a chunk that others
	// join later must not write into it.
	q.add(pendingEvent{kind: kind, data: append([]byte(nil), data...), elapsed: elapsed})
}

// take returns the waiting events, in order, and whether the run has been
// admitted (so far), leaving the queue empty.
func (q *eventQueue) take() ([]pendingEvent, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	evs := q.pending
	q.pending, q.cost = nil, 0
	return evs, q.admitted
}
