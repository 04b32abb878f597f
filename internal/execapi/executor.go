package execapi

import (
	"context"
	"time"
)

// Executor runs one request in a fresh sandbox. The local engine, the HTTP
// client of a remote server and a cluster's front end implement it; front
// ends hold one and never know which.
//
// Exec returns a *ValidationError for bad input and a *Refusal for a call it
// will not run now (before any sandbox starts, both), another error when the
// sandbox itself failed, and otherwise a Result, whatever the program did.
// Cancelling ctx kills the sandbox at once.
type Executor interface {
	Exec(ctx context.Context, req Request, events EventSink) (Result, error)
}

// CheckedExecutor is an Executor that also takes a request already checked
// against its Policy, so that a front end that validates first (to refuse
// bad input before it waits for a slot) hands the Checked on rather than
// have the request validated, and its files decoded, a second time.
type CheckedExecutor interface {
	Executor
	// Policy is what a Checked given to ExecChecked must have passed.
	Policy() Policy
	// ExecChecked is Exec for a request that passed Policy().Validate.
	ExecChecked(ctx context.Context, c Checked, events EventSink) (Result, error)
}

// EventKind says what an Event carries.
type EventKind string

// Event kinds, in the order a run emits them.
const (
	// EventAdmitted says the executor's admission let the call in: a
	// sandbox is being made ready for it now. Elapsed is how long it
	// waited for room. An executor without admission does not send it.
	EventAdmitted EventKind = "admitted"
	EventStarted  EventKind = "started"
	EventStdout   EventKind = "stdout"
	EventStderr   EventKind = "stderr"
	// EventSubmitted says the request went to a remote server, which
	// reports nothing more until the result: whether its sandbox has
	// started, or the code runs, is not known here.
	EventSubmitted EventKind = "submitted"
)

// Event is progress of a run in flight: its start, and output as it arrives.
type Event struct {
	Kind EventKind
	// Data is a chunk of output for EventStdout/EventStderr, already counted
	// against the output cap (chunks past the cap are not sent).
	Data []byte
	// Elapsed is the time since the executor got the call.
	Elapsed time.Duration
}

// EventSink receives events of one run; it may be nil. It is called from the
// run's goroutines, one call at a time, and must return quickly.
type EventSink func(Event)
