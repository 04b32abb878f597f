package httpapi

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// readyFor is how long a proof that the engine starts sandboxes (a probe, or a
// real run torn down cleanly) counts before /readyz looks again.
const readyFor = 30 * time.Second

// probeCaller queues the readiness probe apart from every key (key ids start
// with "key_"; the open-mode caller is empty).
const probeCaller = "(readiness probe)"

// readiness remembers the last probe, so that /readyz starts at most one
// sandbox per readyFor however often it is polled.
type readiness struct {
	mu     sync.Mutex
	lastOK time.Time
}

// readinessReporter is implemented by services that know better than a
// probe whether they can serve (a cluster's front end: a worker is live);
// a probe would start a sandbox somewhere to learn less.
type readinessReporter interface {
	Ready(ctx context.Context) error
}

// Ready reports whether the server can serve runs now: a runtime image is
// installed and the engine has started (and cleanly torn down) a sandbox
// recently; if it has not, Ready runs a trivial probe through the same admission
// as every request. A service that reports its own readiness is asked
// instead.
func (s *Server) Ready(ctx context.Context) error {
	if s.drain.isDraining() {
		return execapi.ErrDraining
	}
	if r, ok := s.cfg.Service.(readinessReporter); ok {
		return r.Ready(ctx)
	}
	info, err := s.gate.Describe(ctx)
	if err != nil {
		return fmt.Errorf("runtimes cannot be listed: %w", err)
	}
	if len(info.Runtimes) == 0 {
		return errors.New("no runtime image is installed (run `scratchrun images build`)")
	}
	s.ready.mu.Lock()
	defer s.ready.mu.Unlock()
	last := s.ready.lastOK
	if n := s.gate.lastClean.Load(); n != 0 && time.Unix(0, n).After(last) {
		last = time.Unix(0, n)
	}
	if time.Since(last) < readyFor {
		return nil
	}
	// The probe is work like any other: draining waits for it.
	if !s.drain.enter() {
		return execapi.ErrDraining
	}
	err = s.probe(ctx, info)
	s.drain.leave()
	if err == nil {
		s.ready.lastOK = time.Now()
	} else if errors.Is(err, execapi.ErrAtCapacity) && !last.IsZero() {
		// No room for the probe beside the runs: the engine evidently works.
		return nil
	}
	return err
}

// probe runs the smallest program of a runtime (bash if installed) in a real
// sandbox, admitted by the engine like any request.
func (s *Server) probe(ctx context.Context, info execapi.Info) error {
	rt := info.Runtimes[0].Name
	for _, r := range info.Runtimes {
		if r.Name == "bash" {
			rt = r.Name
		}
	}
	ctx, cancel := context.WithTimeout(execapi.WithCaller(ctx, probeCaller), 20*time.Second)
	defer cancel()
	res, err := s.cfg.Service.Exec(ctx, execapi.Request{Runtime: rt, Code: "\n", Limits: execapi.Limits{TimeoutMS: 10000}}, nil)
	var refusal *execapi.Refusal
	switch {
	case errors.As(err, &refusal):
		return fmt.Errorf("a sandbox could not be started to check the engine: %w", refusal)
	case err != nil:
		return fmt.Errorf("the engine could not run a %s sandbox: %w", rt, err)
	case res.ExitCode != 0 || !res.StatePurged:
		return fmt.Errorf("a trivial %s run exited %d (state purged: %v): %s", rt, res.ExitCode, res.StatePurged, res.Note)
	}
	return nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
