package frontend

import (
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// mailbox holds the answers to one offer, in the order they came, for the
// goroutine that made it. NATS delivers to the front end's one inbox
// subscription; the handler must never wait for a call. What it holds
// counts in the call's budget: a worker that sends faster than its call
// reads overflows the mailbox, which ends the call.
type mailbox struct {
	mu       sync.Mutex
	msgs     []*nats.Msg
	bytes    int64
	overflow bool
	closed   bool
	budget   *budget
	signal   chan struct{}
}

// open makes the mailbox of a call's answers, holding at most what b
// allows.
func (f *Frontend) open(id string, b *budget) *mailbox {
	mb := &mailbox{signal: make(chan struct{}, 1), budget: b}
	f.boxMu.Lock()
	f.boxes[id] = mb
	f.boxMu.Unlock()
	return mb
}

// closeBox forgets a call's mailbox: later answers are dropped, and what
// it held is held no more.
func (f *Frontend) closeBox(id string) {
	f.boxMu.Lock()
	mb := f.boxes[id]
	delete(f.boxes, id)
	f.boxMu.Unlock()
	if mb == nil {
		return
	}
	mb.mu.Lock()
	defer mb.mu.Unlock()
	mb.closed = true
	mb.msgs = nil
	mb.budget.give(mb.bytes)
	mb.bytes = 0
}

// dispatch puts an answer in its call's mailbox.
func (f *Frontend) dispatch(m *nats.Msg) {
	id := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	f.boxMu.Lock()
	mb := f.boxes[id]
	f.boxMu.Unlock()
	if mb == nil {
		return
	}
	cost := msgCost(m)
	mb.mu.Lock()
	switch {
	case mb.closed || mb.overflow:
	case mb.budget.take(cost):
		mb.msgs = append(mb.msgs, m)
		mb.bytes += cost
	default:
		mb.overflow = true
	}
	mb.mu.Unlock()
	select {
	case mb.signal <- struct{}{}:
	default:
	}
}

// take returns what came so far and empties the mailbox; overflow says
// that answers were dropped because the call would have held more than
// its budget.
func (mb *mailbox) take() (msgs []*nats.Msg, overflow bool) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	msgs = mb.msgs
	mb.msgs = nil
	mb.budget.give(mb.bytes)
	mb.bytes = 0
	return msgs, mb.overflow
}
