package execapi

import "errors"

// WorkerError is the error of a call that a worker of a cluster had (its
// code may have run there) and that ended without a result: the run
// failed on the worker, or the caller went away. It names the worker, as
// a Result does with Worker and a WorkerLostError with its own field, so
// that accounting reads which worker ran a call from what the call
// returned (WorkerOf). It reads and unwraps as the error it carries.
type WorkerError struct {
	// Worker is the id of the worker that had the call.
	Worker string
	// Err is how the call ended there.
	Err error
}

// Error is Err's: which worker it was is for accounting and logs.
func (e *WorkerError) Error() string { return e.Err.Error() }

// Unwrap returns Err, so that front ends map the error as they would
// without a worker.
func (e *WorkerError) Unwrap() error { return e.Err }

// WorkerOf is the worker that ran the call which returned res and err, as
// an Executor that forwards calls to other machines says it (Result.Worker,
// a *WorkerError, a *WorkerLostError); "" when none was named, as on one
// machine, where the local engine runs every call.
func WorkerOf(res Result, err error) string {
	if err == nil {
		return res.Worker
	}
	var lost *WorkerLostError
	if errors.As(err, &lost) {
		return lost.Worker
	}
	var on *WorkerError
	if errors.As(err, &on) {
		return on.Worker
	}
	return ""
}
