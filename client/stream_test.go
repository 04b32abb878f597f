package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// sse is the event stream of a run as the wire contract has it.
var sse = []string{
	"id: 1\nevent: started\ndata: {\"elapsed_ms\": 42}\n\n",
	": keep-alive\n\n",
	"id: 2\nevent: stdout\ndata: {\"text\":\"a\\n\"}\n\n",
	"id: 3\r\nevent: stderr\r\ndata: {\"text\":\"b\\n\"}\r\n\r\n",
	"id: 4\nevent: progress\ndata: {\"new\":true}\n\n",
	"id: 5\nevent: stdout\ndata:{\"text\":\"c\\n\"}\n\n",
	"id: 6\nevent: result\ndata: " + strings.Replace(okResult, `"hi\n"`, `"a\nc\n"`, 1) + "\n\n",
}

// streamServer answers each request with what script returns for it: the
// events to write, and whether to cut the connection after them.
func streamServer(t *testing.T, script func(n int, r *http.Request) (events []string, cut bool)) *httptest.Server {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			t.Errorf("Accept %q", r.Header.Get("Accept"))
		}
		events, cut := script(int(n.Add(1)), r)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-store")
		for _, e := range events {
			fmt.Fprint(w, e)
			http.NewResponseController(w).Flush()
		}
		if cut {
			panic(http.ErrAbortHandler)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// collect runs the stream to its end and describes each pair.
func collect(c *Client, opts ...CallOption) ([]string, error) {
	var got []string
	var last error
	for ev, err := range c.Stream(context.Background(), req, opts...) {
		switch {
		case err != nil:
			got = append(got, "error")
			last = err
		case ev.Kind == EventStarted:
			got = append(got, fmt.Sprintf("%d started %s", ev.ID, ev.Elapsed))
		case ev.Kind == EventResult:
			got = append(got, fmt.Sprintf("%d result %q", ev.ID, ev.Result.Stdout))
		default:
			got = append(got, fmt.Sprintf("%d %s %q", ev.ID, ev.Kind, ev.Text))
		}
	}
	return got, last
}

var wantEvents = `1 started 42ms|2 stdout "a\n"|3 stderr "b\n"|5 stdout "c\n"|6 result "a\nc\n"`

// The events come in the order written, an event of a kind this client
// does not know is passed over, and the result is last.
func TestStreamInOrder(t *testing.T) {
	srv := streamServer(t, func(int, *http.Request) ([]string, bool) { return sse, false })
	got, err := collect(New(srv.URL, ""))
	if err != nil || strings.Join(got, "|") != wantEvents {
		t.Errorf("events %q, %v\nwant %q", got, err, wantEvents)
	}
}

// A stream cut before its last event is resumed, with an Idempotency-Key,
// by a retry whose replay is passed over up to the last event yielded;
// without a key, the cut is the stream's error.
func TestStreamResumesAfterACutOnlyWithAKey(t *testing.T) {
	var keys []string
	srv := streamServer(t, func(n int, r *http.Request) ([]string, bool) {
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		if n == 1 {
			return sse[:3], true
		}
		return sse, false
	})
	got, err := collect(New(srv.URL, ""), WithIdempotencyKey("k-1"))
	if err != nil || strings.Join(got, "|") != wantEvents || len(keys) != 2 || keys[1] != "k-1" {
		t.Errorf("events %q, %v (keys %q)\nwant %q", got, err, keys, wantEvents)
	}

	srv = streamServer(t, func(n int, r *http.Request) ([]string, bool) { return sse[:3], true })
	got, err = collect(New(srv.URL, ""))
	if !errors.Is(err, ErrConnectionLost) || strings.Join(got, "|") != `1 started 42ms|2 stdout "a\n"|error` {
		t.Errorf("cut without a key: %q, %v", got, err)
	}
}

// An error event ends the stream with the server's error document; it is
// not retried (the run had begun).
func TestStreamErrorEvent(t *testing.T) {
	var calls atomic.Int32
	srv := streamServer(t, func(int, *http.Request) ([]string, bool) {
		calls.Add(1)
		return []string{sse[0], "id: 2\nevent: error\ndata: {\"error\":{\"code\":\"worker_lost\",\"message\":\"the worker running this call was lost\"}}\n\n"}, false
	})
	got, err := collect(New(srv.URL, "", WithAutoIdempotency()))
	var ae *APIError
	if !errors.Is(err, ErrWorkerLost) || !errors.As(err, &ae) || ae.Code != CodeWorkerLost || calls.Load() != 1 ||
		strings.Join(got, "|") != "1 started 42ms|error" {
		t.Errorf("error event: %q, %v after %d calls", got, err, calls.Load())
	}
}

// A refusal before the stream began is retried as Run's are; a server that
// does not stream answers with its JSON, yielded as the one result event.
func TestStreamRefusedThenJSON(t *testing.T) {
	s := newScriptServer(t, "429", okResult)
	got, err := collect(New(s.URL, ""))
	if err != nil || strings.Join(got, "|") != `0 result "hi\n"` || len(s.requests()) != 2 {
		t.Errorf("events %q, %v", got, err)
	}
}

// Breaking out of the loop stops the stream: nothing more is yielded.
func TestStreamStopsWhenTheCallerBreaks(t *testing.T) {
	srv := streamServer(t, func(int, *http.Request) ([]string, bool) { return sse, false })
	n := 0
	for range New(srv.URL, "").Stream(context.Background(), req) {
		n++
		break
	}
	if n != 1 {
		t.Errorf("%d events after a break", n)
	}
}
