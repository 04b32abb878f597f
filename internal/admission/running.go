package admission

import (
	"context"
	"time"
)

// AcquireRunning admits a call of caller into a sandbox that already runs
// (a session's), whose run may take up to timeout. Such a call counts
// toward Capacity and the CPU condition like any other, but reserves no
// memory floor and skips the memory condition: its sandbox's memory is
// already in the Memory gauge, which is what the budget holds to, so a
// floor would count it twice and a machine short of memory would refuse
// calls that need no more of it. For the same reason it does not wait
// behind calls that wait only for memory. What a session grows to is
// bounded by its own memory limit and, past the budget, by the reclaim
// of idle sandboxes.
func (c *Controller) AcquireRunning(ctx context.Context, caller string, timeout time.Duration) (*Ticket, error) {
	return c.acquire(ctx, &Ticket{c: c, caller: caller, timeout: timeout, ready: make(chan struct{}), resident: true})
}

// grantResidentLocked admits, in queue order, the resident calls waiting
// that have room, while the call at the head waits for memory (which they
// do not need).
func (c *Controller) grantResidentLocked(now time.Time) {
	for _, t := range c.queue.residents() {
		if c.roomLocked(t) != "" {
			continue
		}
		c.queue.remove(t)
		c.grantLocked(t, now)
		close(t.ready)
	}
}
