package hostside

import (
	"io"
	"os"
	"sync"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// drain copies the sandbox's output pipes to the job's writers (discarding
// when a writer is nil) until both pipes close; wait for it with
// waitDrained.
func drain(job sandbox.Job, stdout, stderr *os.File) *sync.WaitGroup {
	var wg sync.WaitGroup
	copyTo := func(dst io.Writer, src *os.File) {
		defer wg.Done()
		if dst == nil {
			dst = io.Discard
		}
		_, _ = io.Copy(dst, src)
	}
	wg.Add(2)
	go copyTo(job.Stdout, stdout)
	go copyTo(job.Stderr, stderr)
	return &wg
}

// waitDrained waits for drain to finish, at most timeout; it reports
// whether it did. A process user code left holding the pipes (one the
// sandbox's end did not reach) must not hold the engine.
func waitDrained(wg *sync.WaitGroup, timeout time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}
