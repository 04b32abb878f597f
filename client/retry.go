package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// ErrConnectionLost is what an error of a call whose connection failed
// (refused, reset, cut before the whole answer came) matches with
// errors.Is. Without an Idempotency-Key the code may or may not have run;
// with one, the client has retried it, and this is the last retry's error.
var ErrConnectionLost = errors.New("scratchrun: connection to the server lost")

// lostError is a call's connection failing.
type lostError struct {
	method, url string
	err         error
}

func (e *lostError) Error() string {
	return fmt.Sprintf("%s %s: connection lost: %v", e.method, e.url, e.err)
}

// Unwrap gives the cause (a *net.OpError, io.ErrUnexpectedEOF).
func (e *lostError) Unwrap() error { return e.err }

// Is matches ErrConnectionLost.
func (e *lostError) Is(target error) bool { return target == ErrConnectionLost }

// Backoff of retries the server gave no Retry-After for: it doubles from
// firstBackoff up to maxBackoff.
const (
	firstBackoff = 250 * time.Millisecond
	maxBackoff   = 8 * time.Second
)

// retrying runs attempt, and again while its error may be retried (see
// WithRetries), within the client's count and total wait. idempotent says
// the call is safe to repeat whatever happened to it (it has an
// Idempotency-Key, or is a GET).
func (c *Client) retrying(ctx context.Context, idempotent bool, attempt func() error) error {
	var waited time.Duration
	for n := 0; ; n++ {
		err := attempt()
		if err == nil || ctx.Err() != nil || n >= c.cfg.retries {
			return err
		}
		delay, ok := retryDelay(err, idempotent, n)
		if !ok || waited+delay > c.cfg.retryWait {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		waited += delay
	}
}

// retryDelay says whether err may be retried, and after how long: a
// refusal (nothing of the call ran) after its Retry-After, but for the
// key's maximum of sessions; a lost connection or a 503 without a reason
// (a run the server may have begun) only when the call is idempotent.
func retryDelay(err error, idempotent bool, n int) (time.Duration, bool) {
	backoff := min(firstBackoff<<n, maxBackoff)
	var ae *APIError
	if errors.As(err, &ae) {
		switch {
		case ae.Code == CodeSessionLimit:
			// Waiting frees none of the key's sessions (the server sends
			// no Retry-After): only its owner closing one, or a TTL, does.
			return 0, false
		case ae.refused() && ae.RetryAfter > 0:
			return ae.RetryAfter, true
		case ae.refused():
			return backoff, true
		case idempotent && ae.Status == http.StatusServiceUnavailable:
			return max(ae.RetryAfter, backoff), true
		}
		return 0, false
	}
	if idempotent && errors.Is(err, ErrConnectionLost) {
		return backoff, true
	}
	return 0, false
}
