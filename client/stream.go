package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"mime"
	"net/http"
	"time"
)

// EventKind names a streamed event, as the wire does (`event: NAME`).
type EventKind string

// The events of a streamed run, in the order a run sends them: started
// once, stdout and stderr chunks as written, then result or error, last.
const (
	EventStarted EventKind = "started"
	EventStdout  EventKind = "stdout"
	EventStderr  EventKind = "stderr"
	EventResult  EventKind = "result"
	EventError   EventKind = "error"
)

// Event is one step of a streamed run.
type Event struct {
	Kind EventKind
	// ID is the event's id in the stream (1, 2, ...); 0 for a result from
	// a server that does not stream.
	ID int
	// Elapsed is, for EventStarted, the time from the server getting the
	// call to the sandbox running the code.
	Elapsed time.Duration
	// Text is an EventStdout or EventStderr chunk (UTF-8, invalid bytes
	// replaced, as in the result).
	Text string
	// Result is EventResult's: the same result Run returns.
	Result *Result
	// Err is EventError's: the server's error document, when the run
	// failed after the stream began (also the iterator's error then).
	Err *APIError
}

// Stream runs req as Run does, asking for its output as it is written
// (Accept: text/event-stream), and yields the events in order. The last
// pair is the result event with a nil error, or an EventError with the
// error: the server's (an *APIError: refused, invalid, or the run failed
// after it began) or the connection's. A server that does not stream
// answers with its JSON, yielded as a single result event. Retries are
// Run's; a stream cut with an Idempotency-Key is resumed by retrying, the
// events already yielded skipped by their ids. Breaking out of the loop
// closes the connection, which kills the run unless the call has an
// Idempotency-Key.
func (c *Client) Stream(ctx context.Context, req Request, opts ...CallOption) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		body, err := json.Marshal(req)
		if err != nil {
			yield(Event{Kind: EventError}, fmt.Errorf("encode request: %w", err))
			return
		}
		call := c.callFor(opts)
		s := &streamRead{yield: yield}
		err = c.retrying(ctx, call.key != "", func() error {
			return c.attempt(ctx, c.execBound(req), http.MethodPost, "/v1/exec", body, "text/event-stream", call.key, s.read)
		})
		if err != nil && !s.stopped {
			yield(Event{Kind: EventError}, err)
		}
	}
}

// streamRead is one Stream's reading, across its retries.
type streamRead struct {
	yield func(Event, error) bool
	// last is the id of the last event yielded: a retry's replay of the
	// stream yields only what comes after it.
	last int
	// stopped says the caller stopped, or the stream's last event was yielded.
	stopped bool
}

// read reads one answer's events (or its JSON, from a server that does
// not stream). A stream that ends before its last event is a cut
// connection (io.ErrUnexpectedEOF), for the retry to resume.
func (s *streamRead) read(resp *http.Response) error {
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		data, err := readBody(resp)
		if err != nil {
			return err
		}
		res, err := decodeResult(data)
		if err != nil {
			return fmt.Errorf("the result is not the expected JSON: %w", err)
		}
		s.stopped = true
		s.yield(Event{Kind: EventResult, Result: &res}, nil)
		return nil
	}
	var bad error
	err := readSSE(resp.Body, maxResultBytes, func(ev sseEvent) bool {
		if ev.id != 0 && ev.id <= s.last {
			return false // replayed by a retry: yielded already
		}
		out, err := decodeEvent(ev, resp.StatusCode)
		if err != nil {
			bad = err
			return true
		}
		s.last = max(s.last, ev.id)
		if out.Kind == "" {
			return false // a newer server's event this client does not know
		}
		var evErr error
		if out.Err != nil {
			evErr = out.Err
		}
		final := out.Kind == EventResult || out.Kind == EventError
		if !s.yield(out, evErr) || final {
			s.stopped = true
		}
		return s.stopped
	})
	switch {
	case bad != nil:
		return bad
	case err != nil:
		return err
	case !s.stopped:
		return io.ErrUnexpectedEOF
	}
	return nil
}

// decodeEvent reads one event's data as the wire contract has it. An
// event of a kind it does not know comes back with no Kind.
func decodeEvent(ev sseEvent, status int) (Event, error) {
	out := Event{Kind: EventKind(ev.name), ID: ev.id}
	switch out.Kind {
	case EventStarted:
		var d struct {
			ElapsedMS int64 `json:"elapsed_ms"`
		}
		if err := json.Unmarshal(ev.data, &d); err != nil {
			return Event{}, fmt.Errorf("event %d (started): %w", ev.id, err)
		}
		out.Elapsed = time.Duration(d.ElapsedMS) * time.Millisecond
	case EventStdout, EventStderr:
		var d struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(ev.data, &d); err != nil {
			return Event{}, fmt.Errorf("event %d (%s): %w", ev.id, ev.name, err)
		}
		out.Text = d.Text
	case EventResult:
		res, err := decodeResult(ev.data)
		if err != nil {
			return Event{}, fmt.Errorf("event %d (result): %w", ev.id, err)
		}
		out.Result = &res
	case EventError:
		out.Err = errorFrom(status, ev.data)
	default:
		return Event{}, nil
	}
	return out, nil
}
