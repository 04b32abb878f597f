package execapi

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// allRefusals is one refusal of every reason, as executors make them.
func allRefusals() []*Refusal {
	return []*Refusal{
		{Reason: RefusedAtCapacity, RetryAfter: 3 * time.Second},
		{Reason: RefusedQueueFull, RetryAfter: 1500 * time.Millisecond},
		{Reason: RefusedMemory, RetryAfter: 4 * time.Second},
		{Reason: RefusedCPU, RetryAfter: 2 * time.Second},
		{Reason: RefusedKeyRate, RetryAfter: 30 * time.Second, Limit: 2},
		{Reason: RefusedKeyConcurrency, RetryAfter: time.Second, Limit: 4},
		{Reason: RefusedDraining},
		{Reason: RefusedUnknownRuntime, Field: "runtime", Detail: `runtime "cobol" is not installed; installed runtimes: bash`},
		{Reason: RefusedNoWorkers, RetryAfter: 2 * time.Second},
		{Reason: RefusedKeySessions, Limit: 4},
		{Reason: RefusedSessionsFull, RetryAfter: 5 * time.Second, Limit: 64},
	}
}

// Each refusal has one wording that says what was hit and when to retry,
// and unwraps to the error callers already test for.
func TestRefusalWordsAndUnwraps(t *testing.T) {
	for _, r := range allRefusals() {
		msg := r.Error()
		switch r.Reason {
		case RefusedDraining:
			if !errors.Is(r, ErrDraining) || !strings.Contains(msg, "shutting down") {
				t.Errorf("%s: %q", r.Reason, msg)
			}
		case RefusedNoWorkers:
			// Not the capacity of a machine that was used up: no machine.
			if errors.Is(r, ErrAtCapacity) || IsValidation(r) || r.Code() != CodeNoWorkers ||
				msg != "no worker of the cluster is live to run the call. Retry after 2 seconds" {
				t.Errorf("%s: %q, code %q", r.Reason, msg, r.Code())
			}
		case RefusedKeySessions:
			// The caller's own sessions hold it: no retry after a while
			// is promised, and it is not the machine's capacity.
			if errors.Is(r, ErrAtCapacity) || !errors.Is(r, ErrSessionLimit) || r.Code() != CodeSessionLimit || SessionErrorCode(r) != CodeSessionLimit ||
				msg != "this API key already has 4 sessions open, its limit: close one, or wait for one to expire" {
				t.Errorf("%s: %q, code %q", r.Reason, msg, r.Code())
			}
		case RefusedUnknownRuntime:
			var v *ValidationError
			if !errors.As(r, &v) || v.Field != "runtime" || msg != v.Error() || !IsValidation(r) || r.Code() != CodeInvalidRequest {
				t.Errorf("%s: %q (%v)", r.Reason, msg, v)
			}
		default:
			if !errors.Is(r, ErrAtCapacity) || IsValidation(r) {
				t.Errorf("%s does not unwrap to ErrAtCapacity alone", r.Reason)
			}
			secs := r.RetryAfterSeconds()
			want := "Retry after " + map[bool]string{true: "1 second", false: strconv.Itoa(secs) + " seconds"}[secs == 1]
			if !strings.HasSuffix(msg, want) {
				t.Errorf("%s: %q does not end with %q", r.Reason, msg, want)
			}
		}
	}
	for reason, words := range map[RefusalReason]string{RefusedMemory: "memory this machine gives sandboxes", RefusedCPU: "CPUs are saturated"} {
		r := &Refusal{Reason: reason, RetryAfter: time.Second}
		if !strings.Contains(r.Error(), words) || r.Code() != CodeAtCapacity {
			t.Errorf("%s: %q, code %q", reason, r.Error(), r.Code())
		}
	}
	if got := (&Refusal{Reason: RefusedKeyRate, RetryAfter: 29100 * time.Millisecond, Limit: 2}).Error(); got !=
		"this API key's limit of 2 runs per minute is used up. Retry after 30 seconds" {
		t.Errorf("key rate: %q", got)
	}
}

// Refusals survive JSON unchanged: a front end that forwards calls hands
// on the refusal it got.
func TestRefusalSurvivesJSON(t *testing.T) {
	for _, r := range allRefusals() {
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back Refusal
		if err := json.Unmarshal(data, &back); err != nil || !reflect.DeepEqual(&back, r) || back.Error() != r.Error() {
			t.Errorf("%s: %s came back as %+v (%v)", r.Reason, data, back, err)
		}
	}
}
