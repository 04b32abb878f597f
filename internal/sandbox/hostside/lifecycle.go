package hostside

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// The steps of a sandbox's life that every backend takes alike, whatever
// starts and ends its sandboxes.

// StartOrDestroy runs start, which starts sandbox s (named kind in errors:
// "gVisor", "microVM", or "" for the default level). When start fails,
// whatever it made of s is destroyed at once (a teardown that cannot be
// verified is logged with the sandbox's id, as nothing else will see it),
// and the error says which sandbox failed.
func StartOrDestroy(s sandbox.Sandbox, kind string, logger *slog.Logger, start func() error) error {
	err := start()
	if err == nil {
		return nil
	}
	if t := s.Destroy(); !t.Purged {
		logger.Error("teardown of a sandbox that failed to start", "sandbox", s.ID(), "err", t.Err)
	}
	what := "sandbox"
	if kind != "" {
		what = kind + " sandbox"
	}
	return fmt.Errorf("create %s %s: %w", what, s.ID(), err)
}

// UseOnce takes a sandbox for job, the only one it will run: a second job
// is refused, whatever became of the first (sandboxes are used once), and
// so is a job with no command. used is the sandbox's own flag.
func UseOnce(used *bool, job sandbox.Job) error {
	if *used {
		return errors.New("sandbox already ran a job; sandboxes are used once")
	}
	*used = true
	if len(job.Argv) == 0 {
		return errors.New("job has no command")
	}
	return nil
}

// TeardownOf is the teardown that errs (nil for each step that worked)
// describe: verified only when every step worked.
func TeardownOf(errs ...error) sandbox.Teardown {
	err := errors.Join(errs...)
	return sandbox.Teardown{Purged: err == nil, Err: err}
}

// WaitOrKill waits up to timeout for done (a sandbox's process ending by
// itself, which lets it clean up after itself) and otherwise kills it and
// waits for done.
func WaitOrKill(done <-chan struct{}, timeout time.Duration, kill func()) {
	select {
	case <-done:
	case <-time.After(timeout):
		kill()
		<-done
	}
}

// Ended reports whether done is closed, without waiting.
func Ended(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}
