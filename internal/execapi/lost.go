package execapi

import "fmt"

// CodeWorkerLost is the error code of a WorkerLostError, shared by every
// front end (HTTP error documents, the CLI).
const CodeWorkerLost = "worker_lost"

// WorkerLostError is the error of a call handed to a worker of a cluster
// that was then lost (it stopped answering, or restarted) before its result
// came back. Its code may have run, in part or in full: an Executor that
// forwards calls returns this error rather than run the call again
// elsewhere, because untrusted code with side effects must never run twice
// without the caller knowing. Error is the one wording every front end
// shows; Worker and Why are for logs.
type WorkerLostError struct {
	// Worker is the id of the worker that was lost.
	Worker string
	// Why says how it was seen to be lost ("no word from it for 4s").
	Why string
}

// Error is the one wording of a lost worker: what happened, and what it
// means for a retry.
func (e *WorkerLostError) Error() string {
	return "the worker running this call was lost; the code may have run. Retry only if running it twice is harmless"
}

// Detail says which worker was lost and how, for logs (never shown as the
// error: the wording stays one).
func (e *WorkerLostError) Detail() string {
	return fmt.Sprintf("worker %s lost: %s", e.Worker, e.Why)
}
