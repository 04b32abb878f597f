package worker

import (
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// Room for offers not yet started. A front end may hold offers (and send
// their parts) without ever sending the go, and the worker runs as root
// outside any sandbox's memory limit: what it holds for calls that have
// not started is bounded by its capacity, and offers beyond are refused as
// its queue being full, so that the front end tries another worker or
// answers 429.
const (
	// offersPerSandbox: an honest front end sends the go a round trip
	// after the offer, so offers wait for moments; twice the sandboxes
	// (and two) leave room for several front ends racing for the last.
	offersPerSandbox = 2
	offersSlack      = 2
	// offerBytesPerSandbox bounds the parts held per sandbox: above a
	// front end's default body limit (10 MiB). Room for one request of
	// the largest a worker takes is always left.
	offerBytesPerSandbox = 16 << 20
)

// waitingOffers is what the offers not yet started hold together.
// Guarded by the Worker's mutex.
type waitingOffers struct {
	calls int
	bytes int64
}

// release gives back what c holds, once it starts or is forgotten.
func (o *waitingOffers) release(c *call) {
	if c.reserved == 0 {
		return
	}
	o.calls--
	o.bytes -= c.reserved
	c.reserved = 0
}

// holdOfferLocked reserves room for an offer of parts parts, each counted
// at the largest a message may be; a refusal when there is none.
func (w *Worker) holdOfferLocked(c *call, parts int) *execapi.Refusal {
	capacity := max(w.capacity, 1)
	maxCalls := offersPerSandbox*capacity + offersSlack
	maxBytes := max(int64(capacity)*offerBytesPerSandbox, maxRequestBytes+w.cfg.Conn.MaxPayload())
	size := int64(parts) * w.cfg.Conn.MaxPayload()
	if w.waiting.calls+1 > maxCalls || w.waiting.bytes+size > maxBytes {
		return &execapi.Refusal{Reason: execapi.RefusedQueueFull, RetryAfter: max(w.t.Beat, time.Second)}
	}
	w.waiting.calls++
	w.waiting.bytes += size
	c.reserved = size
	return nil
}
