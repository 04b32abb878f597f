package httpapi

import (
	"context"
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// streamKeepAlive is how long a stream may be quiet before a comment is
// sent, so that proxies and clients with read timeouts keep a long, silent
// run's connection (a variable so that tests can shorten it).
var streamKeepAlive = 15 * time.Second

// wantsEventStream reports whether the Accept headers list
// text/event-stream with a quality above zero. Only an explicit listing
// counts: */* is what clients send by default and gets today's JSON.
func wantsEventStream(accept []string) bool {
	for _, v := range accept {
		for _, part := range strings.Split(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil || mt != "text/event-stream" {
				continue
			}
			q, ok := params["q"]
			if !ok {
				return true
			}
			if f, err := strconv.ParseFloat(q, 64); err == nil && f > 0 {
				return true
			}
		}
	}
	return false
}

// streamExec is POST /v1/exec for a client that asked for server-sent
// events. The call goes through the same gate as a JSON one; until the
// engine admits it nothing is written, so that every refusal (a key's
// limit, the queue, bad input the engine finds) is answered exactly as
// without streaming. Then the events are written as they come, each
// flushed, and the result (or an error) ends the stream.
//
// A client that goes away cancels the run, as a JSON one does: its
// request's context ends (net/http ends it on a failed write too). Nothing
// here cancels the run otherwise, so that a wrapper that detaches the
// request's context (an idempotent call's, which outlives its client)
// keeps the run going; after a failed write the rest is not written.
func (s *Server) streamExec(w http.ResponseWriter, r *http.Request, req execapi.Request, received time.Time) {
	s.streamRun(w, r, received, func(ctx context.Context, sink execapi.EventSink) (execapi.Result, any, error) {
		res, err := s.gate.Exec(ctx, req, sink)
		return res, res, err
	})
}

// streamRun is streamExec for any call whose events run's sink gets: run
// returns the call's Result (whose output the last chunks are checked
// against) and the answer the result event carries, the JSON answer's
// body (a Result, or a call in a session's SessionResult).
func (s *Server) streamRun(w http.ResponseWriter, r *http.Request, received time.Time, run func(context.Context, execapi.EventSink) (execapi.Result, any, error)) {
	ctx := r.Context()
	q := newEventQueue(streamBuffer)
	sink := func(ev execapi.Event) { q.push(ev, time.Since(received)) }
	type ended struct {
		res    execapi.Result
		answer any
		err    error
	}
	done := make(chan ended, 1)
	go func() {
		res, answer, err := run(ctx, sink)
		done <- ended{res, answer, err}
	}()

	var out *sseWriter
	keepAlive := time.NewTimer(streamKeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case <-q.wake:
			evs, admitted := q.take()
			if out == nil && admitted {
				out = startStream(w)
			}
			if out != nil {
				out.events(evs)
				keepAlive.Reset(streamKeepAlive)
			}
		case <-keepAlive.C:
			if out != nil {
				out.comment("keep-alive")
			}
			keepAlive.Reset(streamKeepAlive)
		case d := <-done:
			// The handler returns only once the run has: the drain and
			// the accounting see it as they see a JSON call.
			evs, admitted := q.take()
			if out == nil {
				if d.err != nil && !admitted {
					s.writeExecError(w, r, d.err)
					return
				}
				out = startStream(w)
			}
			out.events(evs)
			s.endStream(out, r, d.res, d.answer, d.err)
			return
		}
	}
}

// endStream sends the last event: the result, byte for byte the JSON
// answer's body, or the error document the JSON answer would have had.
func (s *Server) endStream(out *sseWriter, r *http.Request, res execapi.Result, answer any, err error) {
	if err != nil {
		out.rest(nil)
		if r.Context().Err() != nil {
			// The client went away; its run was cancelled and nobody reads this.
			s.log.Debug("client went away during a streamed run", "err", err)
			return
		}
		a := AnswerError(err)
		a.Log(s.log, "run")
		out.send("error", a.Doc)
		return
	}
	out.rest(map[execapi.EventKind]string{execapi.EventStdout: res.Stdout, execapi.EventStderr: res.Stderr})
	out.send("result", answer)
}

// sseWriter writes one run's server-sent events, numbered from 1.
type sseWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	id  int
	err error
	// carry is, per stream, the start of a character that the chunk so
	// far ended inside: it goes out with the next chunk, so that every
	// event's text decodes as the result's does.
	carry map[execapi.EventKind][]byte
}

// startStream commits the response: from here every answer is an event.
func startStream(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // a proxy must pass events on as they come
	w.WriteHeader(http.StatusOK)
	out := &sseWriter{w: w, rc: http.NewResponseController(w), carry: map[execapi.EventKind][]byte{}}
	out.flush()
	return out
}

// streamStarted and streamChunk are the data of the started and
// stdout/stderr events.
type (
	streamStarted struct {
		ElapsedMS int64 `json:"elapsed_ms"`
	}
	streamChunk struct {
		Text string `json:"text"`
	}
)

// events writes waiting events in order.
func (o *sseWriter) events(evs []pendingEvent) {
	for _, ev := range evs {
		switch ev.kind {
		case execapi.EventStarted:
			o.send("started", streamStarted{ElapsedMS: ev.elapsed.Milliseconds()})
		case execapi.EventStdout, execapi.EventStderr:
			b := append(o.carry[ev.kind], ev.data...)
			text, rest := splitIncomplete(b)
			o.carry[ev.kind] = append([]byte(nil), rest...)
			if len(text) > 0 {
				o.send(string(ev.kind), streamChunk{Text: string(text)})
			}
		}
	}
}

// rest sends what a stream's last chunk left of a character. With a
// result (final), only if the result's text ends with it: the engine drops
// a character its output cap cut in two.
func (o *sseWriter) rest(final map[execapi.EventKind]string) {
	for _, kind := range []execapi.EventKind{execapi.EventStdout, execapi.EventStderr} {
		c := o.carry[kind]
		if len(c) == 0 || (final != nil && !strings.HasSuffix(final[kind], string(c))) {
			continue
		}
		o.send(string(kind), streamChunk{Text: string(c)})
	}
}

// send writes one event and flushes it.
func (o *sseWriter) send(name string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		name, data = "error", []byte(`{"error":{"code":"internal","message":"the event could not be encoded"}}`)
	}
	o.id++
	buf := make([]byte, 0, len(data)+len(name)+32)
	buf = append(buf, "id: "...)
	buf = strconv.AppendInt(buf, int64(o.id), 10)
	buf = append(buf, "\nevent: "...)
	buf = append(buf, name...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	o.write(buf)
}

// comment writes a comment line, which clients ignore.
func (o *sseWriter) comment(text string) { o.write([]byte(": " + text + "\n\n")) }

func (o *sseWriter) write(b []byte) {
	if o.err != nil {
		return
	}
	if _, o.err = o.w.Write(b); o.err == nil {
		o.flush()
	}
}

func (o *sseWriter) flush() {
	if o.err != nil {
		return
	}
	o.err = o.rc.Flush()
}

// splitIncomplete splits b before a character its end cuts short (the
// start of a valid encoding whose last bytes have not come yet); invalid
// bytes are complete, and become U+FFFD as the result's do.
func splitIncomplete(b []byte) (complete, rest []byte) {
	for i := len(b) - 1; i >= 0 && i > len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i], b[i:]
			}
			break
		}
	}
	return b, nil
}
