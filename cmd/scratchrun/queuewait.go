//go:build linux

package main

import (
	"time"

	"github.com/scratchrun/scratchrun/internal/settings"
)

// queueWait is how long a call may wait for room, as operators give it
// (--queue-wait, SCRATCHRUN_QUEUE_WAIT) and as the docs state it: 0 means
// no waiting. It is the one convention in cmd/scratchrun; the packages
// that wait read other sentinels (admission's 0 waits as long as the
// call's context allows, the front end's 0 is its default; both take a
// negative value for no waiting), and admission and frontend are the only
// conversions to them, here.
type queueWait time.Duration

// noQueueWait refuses at once what has no room: a worker's (its front
// ends do the waiting).
const noQueueWait queueWait = 0

// operatorQueueWait is the queue wait the settings give.
func operatorQueueWait(v *settings.Values) queueWait {
	return queueWait(v.Duration(settings.QueueWait))
}

// admission is w as admission.Settings.QueueWait takes it.
func (w queueWait) admission() time.Duration { return w.negativeForNone() }

// frontend is w as frontend.Config.QueueWait takes it.
func (w queueWait) frontend() time.Duration { return w.negativeForNone() }

func (w queueWait) negativeForNone() time.Duration {
	if w == 0 {
		return -1
	}
	return time.Duration(w)
}
