// Package admission decides whether a call may start a sandbox now, from
// what the machine has rather than from a fixed count: a call starts while
// the memory all sandboxes use (measured under the budget's cgroup parent)
// plus a floor for each call not yet measured fits the memory budget, the
// CPUs are not saturated (pressure over a short window, below a
// threshold), and the calls running are below an upper bound. Otherwise it
// waits in a fair queue, round-robin across callers, bounded in length
// and in time, and is then refused with an *execapi.Refusal that says why
// (memory, cpu, queue_full, at_capacity) and when to retry, estimated from
// the runs in flight.
//
// A call into a sandbox that runs already (a session's) is admitted with
// AcquireRunning: it counts toward the upper bound and the CPUs, but its
// memory is in the gauge already, so it reserves no floor and does not
// wait behind calls that wait for memory.
//
// The engine admits every call through it, so every front end (HTTP, MCP,
// a cluster's worker) gets the same decisions and the same refusals, and
// what it would admit now (Info's Free) is a number a worker can publish.
// It measures and decides; it never starts, kills or frees a sandbox
// itself (it asks its Reclaim gauge to release idle warm ones).
package admission
