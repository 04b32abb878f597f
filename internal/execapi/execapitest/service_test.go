package execapitest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// The fake speaks the contract as the engine does: it validates, refuses a
// runtime it lacks, finishes results from their facts, passes events on,
// and a cancelled call ends at once with the context's error.
func TestServiceSpeaksTheContract(t *testing.T) {
	s := New("bash")
	ctx := execapi.WithCaller(context.Background(), "key_1")
	if _, err := s.Exec(ctx, execapi.Request{Runtime: "bash"}, nil); !execapi.IsValidation(err) {
		t.Errorf("no code: %v", err)
	}
	var refusal *execapi.Refusal
	if _, err := s.Exec(ctx, execapi.Request{Runtime: "cobol", Code: "x"}, nil); !errors.As(err, &refusal) ||
		refusal.Reason != execapi.RefusedUnknownRuntime || !execapi.IsValidation(err) {
		t.Errorf("unknown runtime: %v", err)
	}

	s.Respond(func(_ context.Context, c Call) Response {
		return Response{Result: Exit(execapi.ExitTimeout, "partial", execapi.Facts{TimedOut: true, TimeoutMS: c.Checked.Timeout.Milliseconds()}),
			Events: []execapi.Event{{Kind: execapi.EventStdout, Data: []byte("partial")}}}
	})
	var kinds []execapi.EventKind
	res, err := s.Exec(ctx, execapi.Request{Runtime: "bash", Code: "sleep 9", Limits: execapi.Limits{TimeoutMS: 1000}},
		func(e execapi.Event) { kinds = append(kinds, e.Kind) })
	if err != nil || res.Outcome != execapi.OutcomeTimeout || res.Note != "The program was killed at the 1000 ms timeout (exit code 124)." ||
		len(kinds) != 2 || kinds[0] != execapi.EventStarted || kinds[1] != execapi.EventStdout {
		t.Errorf("scripted timeout: %+v %v, events %v", res, err, kinds)
	}

	release := make(chan struct{})
	defer close(release)
	s.Respond(func(context.Context, Call) Response { return Response{Result: Success("never"), Release: release} })
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.ExecChecked(cctx, execapi.Checked{Runtime: "bash", Code: "x", Timeout: time.Second}, nil)
		done <- err
	}()
	for s.InFlight() != 1 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v", err)
	}
	if n := s.InFlight(); n != 0 {
		t.Errorf("%d calls in flight after the last ended", n)
	}
	calls, ran := s.Calls(), s.Ran()
	if len(calls) != 4 || len(ran) != 2 || ran[0].Caller != "key_1" || ran[1].Request.Runtime != "" || ran[1].Checked.Runtime != "bash" {
		t.Errorf("calls %+v\nran %+v", calls, ran)
	}
}
