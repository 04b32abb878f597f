package execapi

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// WorkerOf reads the worker from whatever names it, wrapped or not, and
// a WorkerError reads and unwraps as the error it carries.
func TestWorkerOf(t *testing.T) {
	on := &WorkerError{Worker: "w1", Err: context.Canceled}
	for _, c := range []struct {
		res  Result
		err  error
		want string
	}{
		{Result{Worker: "w1"}, nil, "w1"},
		{Result{}, nil, ""},
		{Result{Worker: "stale"}, errors.New("the run failed"), ""},
		{Result{}, fmt.Errorf("exec: %w", on), "w1"},
		{Result{}, &WorkerLostError{Worker: "w2"}, "w2"},
		{Result{}, &Refusal{Reason: RefusedAtCapacity}, ""},
	} {
		if got := WorkerOf(c.res, c.err); got != c.want {
			t.Errorf("WorkerOf(%+v, %v) = %q, want %q", c.res, c.err, got, c.want)
		}
	}
	if !errors.Is(on, context.Canceled) || on.Error() != context.Canceled.Error() {
		t.Errorf("a WorkerError reads %q and unwraps to %v", on.Error(), errors.Unwrap(on))
	}
}
