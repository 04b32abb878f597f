package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

const okResult = `{"exit_code":0,"stdout":"hi\n","stderr":"","execution_ms":3,"state_purged":true,"files":{},"note":"","outcome":"success","facts":{}}`

// scriptServer answers the i-th request with answers[i] (the last one
// again when they run out) and records the requests' Idempotency-Keys.
type scriptServer struct {
	*httptest.Server
	mu   sync.Mutex
	keys []string
}

// drop is an answer that cuts the connection before any byte of it.
const drop = "drop"

func newScriptServer(t *testing.T, answers ...string) *scriptServer {
	s := &scriptServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		n := len(s.keys)
		s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
		s.mu.Unlock()
		a := answers[min(n, len(answers)-1)]
		switch a {
		case drop:
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close()
		case "429":
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":{"code":"concurrency_limited","message":"this API key already has 1 requests in flight, its limit. Retry after 1 second","reason":"key_concurrency","limit":1}}`)
		case "503":
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":{"code":"draining","message":"the server shut down before the run finished; its sandbox was killed"}}`)
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, a)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *scriptServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...)
}

var req = Request{Runtime: "bash", Code: "echo hi"}

// A refusal is retried after its Retry-After, and the answer after it is
// the call's; the refusal's fields are the error's when retries end.
func TestRetriesRefusalsAfterRetryAfter(t *testing.T) {
	s := newScriptServer(t, "429", okResult)
	res, err := New(s.URL, "").Run(context.Background(), req)
	if err != nil || res.Stdout != "hi\n" || len(s.requests()) != 2 {
		t.Fatalf("Run = %+v, %v after %d requests", res, err, len(s.requests()))
	}

	s = newScriptServer(t, "429")
	_, err = New(s.URL, "", WithRetries(2, time.Minute)).Run(context.Background(), req)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 429 || ae.Reason != "key_concurrency" || ae.Limit != 1 || ae.RetryAfter != time.Second ||
		!errors.Is(err, ErrRefused) || len(s.requests()) != 3 {
		t.Errorf("after 2 retries: %v (%d requests)", err, len(s.requests()))
	}
	// A Retry-After beyond the total wait left ends the retries at once.
	s = newScriptServer(t, "429")
	_, err = New(s.URL, "", WithRetries(5, 500*time.Millisecond)).Run(context.Background(), req)
	if !errors.Is(err, ErrRefused) || len(s.requests()) != 1 {
		t.Errorf("Retry-After over the wait: %v (%d requests)", err, len(s.requests()))
	}
	s = newScriptServer(t, "429")
	_, err = New(s.URL, "", WithoutRetries()).Run(context.Background(), req)
	if !errors.Is(err, ErrRefused) || len(s.requests()) != 1 {
		t.Errorf("without retries: %v (%d requests)", err, len(s.requests()))
	}
}

// A lost connection, or a 503 that names no refusal (the run may have
// begun), is retried only when the call has an Idempotency-Key, and then
// with the same key.
func TestRetriesLostConnectionsOnlyWithAKey(t *testing.T) {
	for _, first := range []string{drop, "503"} {
		s := newScriptServer(t, first, okResult)
		_, err := New(s.URL, "").Run(context.Background(), req)
		if err == nil || len(s.requests()) != 1 || s.requests()[0] != "" {
			t.Errorf("%s without a key: %v after %d requests, key %q", first, err, len(s.requests()), s.requests())
		}
		if first == drop && !errors.Is(err, ErrConnectionLost) {
			t.Errorf("dropped: %v, want ErrConnectionLost", err)
		}

		s = newScriptServer(t, first, okResult)
		res, err := New(s.URL, "").Run(context.Background(), req, WithIdempotencyKey("call-1"))
		keys := s.requests()
		if err != nil || res.Stdout != "hi\n" || len(keys) != 2 || keys[0] != "call-1" || keys[1] != "call-1" {
			t.Errorf("%s with a key: %+v, %v; keys sent %q", first, res, err, keys)
		}

		s = newScriptServer(t, first, okResult)
		c := New(s.URL, "", WithAutoIdempotency())
		if _, err := c.Run(context.Background(), req); err != nil {
			t.Errorf("%s with automatic keys: %v", first, err)
		}
		if _, err := c.Run(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		keys = s.requests()
		if len(keys) != 3 || keys[0] == "" || keys[0] != keys[1] || keys[2] == keys[0] || len(keys[0]) > 255 {
			t.Errorf("%s with automatic keys: keys sent %q, want one per call, the same on its retry", first, keys)
		}
	}
}

// Cancelling the call ends the wait for a retry.
func TestCancelEndsTheRetryWait(t *testing.T) {
	refused := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"error":{"code":"at_capacity","message":"at capacity","reason":"at_capacity"}}`)
		select {
		case refused <- struct{}{}:
		default:
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := New(srv.URL, "", WithRetries(100, 2*time.Hour)).Run(ctx, req)
		done <- err
	}()
	<-refused
	cancel()
	if err := <-done; !errors.Is(err, ErrRefused) && !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled during the wait: %v", err)
	}
}
