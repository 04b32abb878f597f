package frontend

import (
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// mailbox holds the answers to one offer, in the order they came, for the
// goroutine that made it. NATS delivers to the front end's one inbox
// subscription; the handler must never wait for a call.
type mailbox struct {
	mu     sync.Mutex
	msgs   []*nats.Msg
	signal chan struct{}
}

// open makes the mailbox of a call's answers.
func (f *Frontend) open(id string) *mailbox {
	mb := &mailbox{signal: make(chan struct{}, 1)}
	f.boxMu.Lock()
	f.boxes[id] = mb
	f.boxMu.Unlock()
	return mb
}

// closeBox forgets a call's mailbox: later answers are dropped.
func (f *Frontend) closeBox(id string) {
	f.boxMu.Lock()
	delete(f.boxes, id)
	f.boxMu.Unlock()
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
	mb.mu.Lock()
	mb.msgs = append(mb.msgs, m)
	mb.mu.Unlock()
	select {
	case mb.signal <- struct{}{}:
	default:
	}
}

// take returns what came so far and empties the mailbox.
func (mb *mailbox) take() []*nats.Msg {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	msgs := mb.msgs
	mb.msgs = nil
	return msgs
}
