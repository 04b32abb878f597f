// Package execapitest is a scripted execapi.Service for tests of front ends
// (the MCP adapter, the HTTP gate and its key limits, a cluster's), so that
// they run in milliseconds without root, images or sandboxes.
//
// It is no mock of the engine's insides: it speaks the contract with its
// real types — it validates requests with a real execapi.Policy, refuses
// runtimes it does not have with the engine's *execapi.Refusal, takes
// checked requests (execapi.CheckedExecutor) as the engine does, ends a run
// when its context is cancelled, and builds results with
// execapi.Result.Finish — and it records every call. What a run returns,
// and how long it takes, is the test's script.
package execapitest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// Service is a scripted execapi.Service and execapi.CheckedExecutor. It is
// safe for concurrent use.
type Service struct {
	policy execapi.Policy
	info   execapi.Info

	mu          sync.Mutex
	respond     func(ctx context.Context, c Call) Response
	describeErr error
	calls       []Call
	inFlight    int
}

var _ execapi.CheckedExecutor = (*Service)(nil)
var _ execapi.Service = (*Service)(nil)

// New returns a Service with the contract's default policy offering
// runtimes (in that order). Until Respond is set it answers every call with
// a success that prints nothing.
func New(runtimes ...string) *Service {
	return NewWithPolicy(execapi.DefaultPolicy(), runtimes...)
}

// NewWithPolicy is New with another policy (egress allowed, other limits);
// Describe reports it, as the engine does.
func NewWithPolicy(p execapi.Policy, runtimes ...string) *Service {
	info := p.Info()
	info.Isolation = "fake"
	info.OutputLimitBytes, info.MaxReturnBytes = 1<<20, 10<<20
	info.UnenforcedLimits = []string{}
	for _, name := range runtimes {
		info.Runtimes = append(info.Runtimes, execapi.RuntimeInfo{Name: name, Version: "1.0", Image: "fake", Libraries: []string{}})
	}
	return &Service{policy: p, info: info}
}

// Response is the script of one call.
type Response struct {
	// Result is what the call returns when Err is nil. One without an
	// Outcome is finished (execapi.Result.Finish) from its exit code and
	// facts, as the engine finishes its own.
	Result execapi.Result
	// Err, when set, is returned instead (a *execapi.Refusal, say).
	Err error
	// Events are sent, after execapi.EventStarted, as the run starts.
	Events []execapi.Event
	// NoEvents sends none, EventStarted neither: a service that reports
	// nothing before it answers (a cluster's front end whose worker was
	// lost after the go, before its first frame).
	NoEvents bool
	// Delay is how long the run takes; Release, when set, holds it until
	// closed. Cancelling the call's context ends either at once, and the
	// call returns the context's error, as the engine does when it kills a
	// sandbox.
	Delay   time.Duration
	Release <-chan struct{}
}

// Call is one call as the Service saw it.
type Call struct {
	// Caller is execapi.CallerFrom of the call's context.
	Caller string
	// Request is what Exec got; zero for a call that came through
	// ExecChecked.
	Request execapi.Request
	// Checked is the request as validated (by Exec, or by the caller of
	// ExecChecked); zero when validation refused it.
	Checked execapi.Checked
	// Result and Err are what the call returned.
	Result execapi.Result
	Err    error
}

// Respond sets the script: f is called once per call that passed
// validation and names an installed runtime, with the call so far.
func (s *Service) Respond(f func(ctx context.Context, c Call) Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.respond = f
}

// FailDescribe makes Describe return err (nil: answer again), as a remote
// server that cannot be reached does.
func (s *Service) FailDescribe(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.describeErr = err
}

// Calls returns every call so far, in the order they ended.
func (s *Service) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// Ran returns the calls that got past validation and the runtime check:
// those the engine would have started a sandbox for.
func (s *Service) Ran() []Call {
	var out []Call
	for _, c := range s.Calls() {
		if c.Checked.Runtime != "" && !isRefusalOrInvalid(c.Err) {
			out = append(out, c)
		}
	}
	return out
}

// InFlight is how many calls are running now.
func (s *Service) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight
}

// Describe implements execapi.Service.
func (s *Service) Describe(context.Context) (execapi.Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.describeErr != nil {
		return execapi.Info{}, s.describeErr
	}
	info := s.info
	info.Runtimes = slices.Clone(info.Runtimes)
	return info, nil
}

// Policy implements execapi.CheckedExecutor.
func (s *Service) Policy() execapi.Policy { return s.policy }

// Exec implements execapi.Executor: it validates req, then runs it as
// ExecChecked does.
func (s *Service) Exec(ctx context.Context, req execapi.Request, events execapi.EventSink) (execapi.Result, error) {
	checked, err := s.policy.Validate(req)
	if err != nil {
		s.record(Call{Caller: execapi.CallerFrom(ctx), Request: req, Err: err})
		return execapi.Result{}, err
	}
	return s.run(ctx, Call{Caller: execapi.CallerFrom(ctx), Request: req, Checked: checked}, events)
}

// ExecChecked implements execapi.CheckedExecutor.
func (s *Service) ExecChecked(ctx context.Context, c execapi.Checked, events execapi.EventSink) (execapi.Result, error) {
	return s.run(ctx, Call{Caller: execapi.CallerFrom(ctx), Checked: c}, events)
}

func (s *Service) run(ctx context.Context, call Call, events execapi.EventSink) (execapi.Result, error) {
	s.mu.Lock()
	if !s.installedLocked(call.Checked.Runtime) {
		call.Err = &execapi.Refusal{Reason: execapi.RefusedUnknownRuntime, Field: "runtime",
			Detail: fmt.Sprintf("runtime %q is not installed; installed runtimes: %s", call.Checked.Runtime, s.runtimeListLocked())}
		s.calls = append(s.calls, call)
		s.mu.Unlock()
		return execapi.Result{}, call.Err
	}
	respond := s.respond
	s.inFlight++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()

	resp := Response{Result: Success("")}
	if respond != nil {
		resp = respond(ctx, call)
	}
	if events != nil && !resp.NoEvents {
		events(execapi.Event{Kind: execapi.EventStarted})
		for _, ev := range resp.Events {
			events(ev)
		}
	}
	call.Result, call.Err = resp.Result, resp.Err
	if err := wait(ctx, resp.Delay, resp.Release); err != nil {
		call.Result, call.Err = execapi.Result{}, err
	}
	if call.Err != nil {
		call.Result = execapi.Result{}
	} else {
		if call.Result.Files == nil {
			call.Result.Files = map[string]string{}
		}
		if call.Result.Outcome == "" {
			call.Result.Finish()
		}
	}
	s.record(call)
	return call.Result, call.Err
}

// wait holds a run for delay and until release is closed, or until ctx ends.
func wait(ctx context.Context, delay time.Duration, release <-chan struct{}) error {
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if release != nil {
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return ctx.Err()
}

func (s *Service) record(c Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
}

func (s *Service) installedLocked(name string) bool {
	return slices.ContainsFunc(s.info.Runtimes, func(rt execapi.RuntimeInfo) bool { return rt.Name == name })
}

func (s *Service) runtimeListLocked() string {
	names := make([]string, 0, len(s.info.Runtimes))
	for _, rt := range s.info.Runtimes {
		names = append(names, rt.Name)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func isRefusalOrInvalid(err error) bool {
	var r *execapi.Refusal
	return execapi.IsValidation(err) || errors.As(err, &r)
}

// Success is the result of a program that printed stdout and exited 0, in
// a sandbox torn down cleanly, finished as the engine finishes results.
func Success(stdout string) execapi.Result {
	return Exit(0, stdout, execapi.Facts{})
}

// Exit is the result of a program that printed stdout and ended with
// exitCode, with facts (a limit hit, output cut), finished as the engine
// finishes results: its Outcome and Note come from them.
func Exit(exitCode int, stdout string, facts execapi.Facts) execapi.Result {
	r := execapi.Result{ExitCode: exitCode, Stdout: stdout, StatePurged: true, Files: map[string]string{}, Facts: facts}
	r.Finish()
	return r
}
