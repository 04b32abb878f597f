package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/images"
)

// SessionEngine is what the session benchmark runs against: an engine
// that runs plain calls and holds sessions.
type SessionEngine interface {
	execapi.CheckedExecutor
	execapi.SessionService
}

// SessionReport compares a call in a warm session with the same code as a
// plain call (a fresh sandbox each) and run bare, in one run, and the
// memory an idle session holds against the interpreter waiting bare.
type SessionReport struct {
	Workload    string `json:"workload"`
	N           int    `json:"n"`
	Concurrency int    `json:"concurrency"`
	Network     string `json:"network"`
	IntervalMS  int64  `json:"interval_ms"`
	// Exec is the plain calls (/v1/exec), Session the calls in sessions
	// (one session per concurrent caller), Bare the interpreter bare.
	Exec    Stats `json:"exec"`
	Session Stats `json:"session"`
	Bare    Stats `json:"bare"`
	// Ratios of the session's p50 and throughput to the plain call's and
	// to bare.
	RatioSessionToExecP50        float64 `json:"ratio_session_to_exec_p50"`
	RatioSessionToBareP50        float64 `json:"ratio_session_to_bare_p50"`
	RatioSessionToExecThroughput float64 `json:"ratio_session_to_exec_throughput"`
	// IdleSessionBytes is what one session's sandbox uses once its calls
	// are done (its interpreter kept), as the engine measures it;
	// BareIdleBytes the interpreter's anonymous memory waiting bare (0 for
	// runtimes without one).
	IdleSessionBytes int64   `json:"idle_session_bytes"`
	BareIdleBytes    int64   `json:"bare_idle_bytes"`
	RatioIdleMemory  float64 `json:"ratio_idle_memory"`
}

// sessionCaller is whose sessions the benchmark opens: the engine binds a
// session to a caller.
const sessionCaller = "bench"

// RunSession measures w as plain calls, as calls in warm sessions and bare.
// Each concurrent caller opens one session, makes o.Warmup calls in it
// (the first starts its interpreter) and then its share of o.N; the
// sessions are closed at the end.
func RunSession(ctx context.Context, eng SessionEngine, rt images.Resolved, w Workload, o Options) (SessionReport, error) {
	if o.N < 1 || o.Concurrency < 1 {
		return SessionReport{}, errors.New("bench: --n and --concurrency must be at least 1")
	}
	ctx = execapi.WithCaller(ctx, sessionCaller)
	req := execapi.Request{Runtime: w.Runtime, Code: w.Code, ReturnFiles: w.Return, Network: o.Network}
	check := func(what string, res execapi.Result) error {
		if res.ExitCode != 0 {
			return fmt.Errorf("%s %s exited %d: %s", what, w.Name, res.ExitCode, strings.TrimSpace(res.Stderr))
		}
		if len(w.Return) > 0 && len(res.Files) != len(w.Return) {
			return fmt.Errorf("%s %s returned %d files, want %d (%s)", what, w.Name, len(res.Files), len(w.Return), res.Note)
		}
		return nil
	}
	execOnce := func() error {
		res, err := eng.Exec(ctx, req, nil)
		if err != nil {
			return err
		}
		return check("call", res)
	}
	sessions, err := openBenchSessions(ctx, eng, w, o)
	defer closeBenchSessions(ctx, eng, sessions)
	if err != nil {
		return SessionReport{}, err
	}
	// Each of measure's workers takes a session of its own from the
	// channel, so that no two calls wait on one session.
	free := make(chan benchSession, len(sessions))
	for _, s := range sessions {
		free <- s
	}
	sessionOnce := func() error {
		s := <-free
		defer func() { free <- s }()
		res, err := eng.ExecInSession(ctx, execapi.SessionRef{ID: s.info.ID}, s.checked, nil)
		if err != nil {
			return err
		}
		return check("session call", res.Result)
	}
	bareOnce := func() error { return runBare(ctx, rt.RootFS, w) }
	for range o.Warmup {
		for _, once := range []func() error{execOnce, bareOnce} {
			if err := once(); err != nil {
				return SessionReport{}, err
			}
		}
	}
	for range o.Warmup {
		for range sessions {
			if err := sessionOnce(); err != nil {
				return SessionReport{}, err
			}
		}
	}
	r := SessionReport{Workload: w.Name, N: o.N, Concurrency: o.Concurrency, Network: o.Network, IntervalMS: o.Interval.Milliseconds()}
	if r.Exec, err = measure(ctx, o, execOnce); err != nil {
		return r, fmt.Errorf("plain calls: %w", err)
	}
	if r.Session, err = measure(ctx, o, sessionOnce); err != nil {
		return r, fmt.Errorf("session calls: %w", err)
	}
	if r.Bare, err = measure(ctx, o, bareOnce); err != nil {
		return r, fmt.Errorf("bare: %w", err)
	}
	r.RatioSessionToExecP50 = ratio(r.Session.P50, r.Exec.P50)
	r.RatioSessionToBareP50 = ratio(r.Session.P50, r.Bare.P50)
	r.RatioSessionToExecThroughput = ratio(r.Session.Throughput, r.Exec.Throughput)
	if r.IdleSessionBytes, err = idleSessionMemory(ctx, eng, sessions[0].info.ID); err != nil {
		return r, err
	}
	if argv := IdleCommand(rt.Runtime); argv != nil {
		if r.BareIdleBytes, err = BareIdleMemory(ctx, rt.RootFS, argv); err != nil {
			return r, fmt.Errorf("bare idle memory: %w", err)
		}
	}
	r.RatioIdleMemory = ratio(float64(r.IdleSessionBytes), float64(r.BareIdleBytes))
	return r, nil
}

// benchSession is one open session and the call the benchmark makes in it.
type benchSession struct {
	info    execapi.SessionInfo
	checked execapi.Checked
}

func openBenchSessions(ctx context.Context, eng SessionEngine, w Workload, o Options) ([]benchSession, error) {
	open, err := eng.SessionPolicy().ValidateSession(eng.Policy(), execapi.SessionRequest{Runtime: w.Runtime, Network: o.Network})
	if err != nil {
		return nil, fmt.Errorf("bench: a session for %s: %w", w.Name, err)
	}
	var out []benchSession
	for range o.Concurrency {
		info, err := eng.OpenSession(ctx, open)
		if err != nil {
			return out, fmt.Errorf("bench: opening a session: %w", err)
		}
		req := execapi.Request{Code: w.Code, ReturnFiles: w.Return}
		if w.TimeoutMS > 0 {
			req.Limits.TimeoutMS = w.TimeoutMS
		}
		checked, err := eng.Policy().ValidateInSession(req, info, open.Env)
		if err != nil {
			return append(out, benchSession{info: info}), fmt.Errorf("bench: a call in a session: %w", err)
		}
		out = append(out, benchSession{info: info, checked: checked})
	}
	return out, nil
}

func closeBenchSessions(ctx context.Context, eng SessionEngine, sessions []benchSession) {
	for _, s := range sessions {
		// A closing that fails leaves the session to its idle TTL; the
		// benchmark's numbers are already taken.
		_, _ = eng.CloseSession(context.WithoutCancel(ctx), execapi.SessionRef{ID: s.info.ID})
	}
}

// idleSessionMemory lets the session settle after its last call and reads
// what the engine says it uses.
func idleSessionMemory(ctx context.Context, eng SessionEngine, id string) (int64, error) {
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	list, err := eng.ListSessions(ctx)
	if err != nil {
		return 0, err
	}
	for _, s := range list {
		if s.ID == id {
			return s.MemoryBytes, nil
		}
	}
	return 0, fmt.Errorf("bench: session %s is not listed after its calls", id)
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}
