package httpapi

import (
	"errors"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// The gate's own limits: a key's rate, and what its refusals unwrap to.
// (Admission, the fair queue included, is the engine's: package admission.)

func TestRateLimiterBucket(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newRateLimiter()
	l.now = func() time.Time { return now }
	for i := range 3 {
		if ok, _ := l.take("k", 3); !ok {
			t.Fatalf("take %d of 3 refused", i)
		}
	}
	ok, wait := l.take("k", 3)
	if ok || wait < 19*time.Second || wait > 20*time.Second {
		t.Errorf("fourth take: %v, wait %s (want about 20 s at 3/min)", ok, wait)
	}
	l.refund("k")
	if ok, _ := l.take("k", 3); !ok {
		t.Error("a refunded token cannot be taken")
	}
	now = now.Add(20 * time.Second)
	if ok, _ := l.take("k", 3); !ok {
		t.Error("no token after 20 s at 3/min")
	}
	if ok, _ := l.take("other", 3); !ok {
		t.Error("keys share a bucket")
	}
	if ok, _ := l.take("", 0); !ok {
		t.Error("a caller without a rate was limited")
	}
	now = now.Add(time.Hour)
	l.take("k", 3)
	if b := l.buckets["k"]; b.tokens > 2 {
		t.Errorf("bucket grew past its size: %v", b.tokens)
	}
}

// Every refusal of the gate says when to retry, rounded up to whole
// seconds, and unwraps to what callers test for: ErrAtCapacity, or
// ErrDraining while draining.
func TestRejectionErrors(t *testing.T) {
	for _, r := range []execapi.RefusalReason{execapi.RefusedAtCapacity, execapi.RefusedQueueFull, execapi.RefusedKeyRate,
		execapi.RefusedKeyConcurrency, execapi.RefusedDraining} {
		err := error(&execapi.Refusal{Reason: r, RetryAfter: 1500 * time.Millisecond, Limit: 3})
		if r == execapi.RefusedDraining {
			if !errors.Is(err, execapi.ErrDraining) {
				t.Errorf("%s does not wrap ErrDraining", r)
			}
			continue
		}
		if !errors.Is(err, errAtCapacity()) || !containsAll(err.Error(), "Retry after 2 seconds") {
			t.Errorf("%s: %v", r, err)
		}
	}
}
