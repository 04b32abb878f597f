package worker

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/scratchrun/scratchrun/internal/cluster"
)

// call is one call the worker holds, from its offer until the caller has
// its last frame. Guarded by the Worker's mutex.
type call struct {
	id, reply, caller string
	// op is the session operation (cluster.OpSession*), "" for a call.
	op string
	// state is cluster.StateWaiting, StateRunning or StateFinished.
	state string
	// parts of the request, have of them so far; goSeen whether the go
	// came (the run starts once both are complete).
	parts  [][]byte
	have   int
	goSeen bool
	// reserved is what the offer holds of the worker's room for offers
	// (its parts at their largest) until it starts or is forgotten.
	reserved int64
	// created is when the offer came; heard when the caller last sent a
	// frame; finished when the last frame went out.
	created, heard, finished time.Time
	// cancel ends the run; callerGone says it was because the caller
	// cancelled or fell silent (nobody waits for a frame), shutdownKill
	// because the worker was closed (the caller is told).
	cancel       context.CancelFunc
	callerGone   bool
	shutdownKill bool

	// seq numbers the frames sent; unacked holds those the caller has
	// not acknowledged, oldest first, to send again when they are lost.
	seq     int
	unacked []*sentFrame
	// outbox holds the call's frames for its sender, in order; sending
	// says a sender goroutine drains it (see queueLocked).
	outbox  []outFrame
	sending bool
	// beatQueued says a beat's answer waits in the outbox.
	beatQueued bool
	// batch gathers output events for one frame; flush sends it.
	batch      []cluster.WireEvent
	batchBytes int
	flush      *time.Timer
}

// sentFrame is a numbered frame and when it was last sent; queued while
// it waits in the call's outbox (it is not sent again meanwhile).
type sentFrame struct {
	seq    int
	msg    *nats.Msg
	at     time.Time
	queued bool
}

// outFrame is a frame in a call's outbox: numbered ones carry their
// sentFrame, to note when they went out.
type outFrame struct {
	msg  *nats.Msg
	sent *sentFrame
	beat bool
}

// missing lists the request parts not yet received.
func (c *call) missing() []int {
	var out []int
	for i, p := range c.parts {
		if p == nil {
			out = append(out, i)
		}
	}
	return out
}
