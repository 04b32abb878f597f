package httpapi

import "sync"

// drainState counts the requests in flight and, once draining starts, turns
// new ones away, so that shutdown can wait for exactly the work it accepted.
type drainState struct {
	mu       sync.Mutex
	draining bool
	inFlight int
	idle     chan struct{} // closed when draining and inFlight reaches 0
}

func newDrainState() *drainState { return &drainState{idle: make(chan struct{})} }

// enter admits a request unless the server is draining; a true result must be
// matched by leave.
func (d *drainState) enter() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.draining {
		return false
	}
	d.inFlight++
	return true
}

func (d *drainState) leave() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inFlight--
	if d.draining && d.inFlight == 0 {
		close(d.idle)
	}
}

// start begins draining and returns a channel closed once nothing accepted
// before is still in flight.
func (d *drainState) start() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.draining {
		d.draining = true
		if d.inFlight == 0 {
			close(d.idle)
		}
	}
	return d.idle
}

func (d *drainState) isDraining() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.draining
}
