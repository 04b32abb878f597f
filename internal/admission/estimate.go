package admission

import (
	"sort"
	"time"
)

const (
	defaultRunEstimate = time.Second     // expected run length before any run has finished
	estimateSmoothing  = 0.2             // weight of the newest run in the running average
	teardownAllowance  = 2 * time.Second // a run may outlive its timeout by teardown
	minimumRetryAfter  = time.Second     // Retry-After is whole seconds, at least one
)

// remainingLocked estimates, for each running call, how long until it
// ends: the average run length minus what it has run, never more than its
// timeout (plus teardown) allows. Sorted ascending.
func (c *Controller) remainingLocked(now time.Time) []time.Duration {
	rem := make([]time.Duration, 0, len(c.running))
	for t := range c.running {
		elapsed := now.Sub(t.admitted)
		left := c.avg - elapsed
		if bound := t.timeout + teardownAllowance - elapsed; left > bound {
			left = bound
		}
		rem = append(rem, max(left, 0))
	}
	sort.Slice(rem, func(i, j int) bool { return rem[i] < rem[j] })
	return rem
}

// estimateLocked is how long a call with ahead calls queued before it
// would wait: room frees as running calls end, and the machine held as
// many as run now, so everyone ahead goes through in rounds of that many,
// each an average run long.
func (c *Controller) estimateLocked(ahead int, now time.Time) time.Duration {
	rem := c.remainingLocked(now)
	if len(rem) == 0 {
		// Nothing runs and still no room: another engine's sandboxes, or
		// the host, hold the machine; a run's length is the best guess.
		return max(c.avg, minimumRetryAfter)
	}
	n := len(rem)
	d := rem[ahead%n] + time.Duration(ahead/n)*c.avg
	return max(d, minimumRetryAfter)
}
