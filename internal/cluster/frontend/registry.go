package frontend

import (
	"slices"
	"sync"
	"time"

	"github.com/scratchrun/scratchrun/internal/cluster"
)

// registry is the front end's view of the workers: each registration as
// last published, and when the worker was last heard (its registration,
// or a frame of a call). It is a cache of the bucket, rebuilt from it on
// start.
type registry struct {
	// liveWindow: a worker not heard for this long is taken to be gone.
	// silentAfter: a registry with no update at all for this long is
	// itself taken to be unwell (a NATS node and its stream leader lost),
	// and then workers stay live up to staleFor on what was last known:
	// a call placed on one that is really gone learns so at once (no
	// responders), while a registry outage does not stop the service.
	liveWindow, silentAfter, staleFor time.Duration

	mu         sync.Mutex
	workers    map[string]*known
	lastUpdate time.Time
}

// known is one worker as the front end knows it.
type known struct {
	reg   cluster.Registration
	heard time.Time
	// gone says a call found nobody listening on the worker's subjects
	// since its last registration: it is not placed on until it
	// registers again.
	gone bool
}

func newRegistry(liveWindow, beat time.Duration) *registry {
	return &registry{liveWindow: liveWindow, silentAfter: 3 * beat, staleFor: 6 * liveWindow, workers: map[string]*known{}}
}

// put records a registration as published now.
func (r *registry) put(reg cluster.Registration, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastUpdate = now
	r.workers[reg.ID] = &known{reg: reg, heard: now}
}

// remove forgets a worker that deregistered (it drains: no new calls).
func (r *registry) remove(id string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastUpdate = now
	delete(r.workers, id)
}

// heard notes a frame from a worker of a call: it lives.
func (r *registry) heard(id string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k := r.workers[id]; k != nil && !k.gone {
		k.heard = now
	}
}

// markFull notes that a worker's engine refused a call for want of room:
// until its next heartbeat it counts as having no free sandbox (answers
// to calls carry no admission figures, so nothing better is known).
func (r *registry) markFull(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k := r.workers[id]; k != nil && k.reg.Admission != nil {
		// A copy: registrations handed out by live share the old one.
		adm := *k.reg.Admission
		adm.Free = 0
		k.reg.Admission = &adm
	}
}

// gone notes that nobody listens on a worker's subjects.
func (r *registry) markGone(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k := r.workers[id]; k != nil {
		k.gone = true
	}
}

// live lists the workers taken to be live now, in no particular order
// (Frontend.Workers sorts them for those who show them).
func (r *registry) live(now time.Time) []cluster.Registration {
	r.mu.Lock()
	defer r.mu.Unlock()
	silent := now.Sub(r.lastUpdate) > r.silentAfter
	var out []cluster.Registration
	for _, k := range r.workers {
		age := now.Sub(k.heard)
		if !k.gone && (age < r.liveWindow || silent && age < r.staleFor) {
			out = append(out, k.reg)
		}
	}
	return out
}

// silentFor is how long the registry has gone without any update.
func (r *registry) silentFor(now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return now.Sub(r.lastUpdate)
}

// candidates are the live workers that can run runtime (with egress when
// asked), in a slice of their own.
func candidates(live []cluster.Registration, runtime string, egress bool) []cluster.Registration {
	return slices.DeleteFunc(slices.Clone(live), func(w cluster.Registration) bool {
		return !w.Offers(runtime) || egress && !w.EgressAllowed
	})
}
