package execapi

import (
	"context"
	"sync"
)

type workerNoteKey struct{}

// workerNote is where NoteWorker writes, for the one who asked.
type workerNote struct {
	mu sync.Mutex
	id string
}

// WithWorkerNote returns ctx with room for an Executor below to say which
// worker ran the call (NoteWorker), and a function that returns what it
// said: "" when nothing was said, as on one machine, where the local engine
// runs every call. Accounting (the HTTP gate's usage rows) asks; an
// Executor that forwards calls to other machines answers, also for a call
// that failed there.
func WithWorkerNote(ctx context.Context) (context.Context, func() string) {
	n := &workerNote{}
	return context.WithValue(ctx, workerNoteKey{}, n), func() string {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.id
	}
}

// NoteWorker says that the call of ctx runs, or ran, on the worker id; it
// does nothing where nobody asked (WithWorkerNote). A later note replaces an
// earlier one.
func NoteWorker(ctx context.Context, id string) {
	if n, ok := ctx.Value(workerNoteKey{}).(*workerNote); ok {
		n.mu.Lock()
		n.id = id
		n.mu.Unlock()
	}
}
