package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/httpapi"
)

// Streaming of a playground run.
const (
	// eventBuffer is how many events may wait for the browser; beyond
	// it the preview skips output (the result carries all of it).
	eventBuffer = 256
	// keepaliveEvery sends a comment to keep proxies from closing a
	// stream that is quiet while the code runs.
	keepaliveEvery = 15 * time.Second
)

// run is POST /console/api/run: the contract's request (as POST /v1/exec
// takes it) run through the server's gate as httpapi.ConsoleCaller,
// answered as server-sent events: "started", then "stdout" and "stderr"
// as output arrives ({"b64", "elapsed_ms"}), then either "result"
// ({"result", "preview_incomplete"}) or "error" ({"status", "error"}: the
// API's status and error document for the same failure).
func (h *handlers) run(w http.ResponseWriter, r *http.Request) {
	limit := h.cfg.MaxBodyBytes
	if r.ContentLength > limit {
		h.tooLarge(w)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if tooLarge := new(http.MaxBytesError); errors.As(err, &tooLarge) {
			h.tooLarge(w)
			return
		}
		writeFieldError(w, "body", "could not be read: "+err.Error())
		return
	}
	req, err := execapi.DecodeRequest(bytes.NewReader(body), limit)
	if err != nil {
		httpapi.AnswerError(err).Write(w)
		return
	}
	// The server's gate, as the console holds it, records the run under
	// httpapi.ConsoleCaller and counts it against no key's limits.
	ctx := r.Context()

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no") // a proxy must pass events on as they come
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(event string, v any) {
		data, err := json.Marshal(v)
		if err != nil {
			data = []byte(`{}`)
		}
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data)
		rc.Flush()
	}

	events := make(chan execapi.Event, eventBuffer)
	var dropped atomic.Bool
	sink := func(e execapi.Event) {
		e.Data = bytes.Clone(e.Data) // the sender may reuse its buffer
		select {
		case events <- e:
		default:
			dropped.Store(true)
		}
	}
	type ended struct {
		res execapi.Result
		err error
	}
	done := make(chan ended, 1)
	go func() {
		res, err := h.svc.Exec(ctx, req, sink)
		done <- ended{res, err}
	}()
	keepalive := time.NewTicker(keepaliveEvery)
	defer keepalive.Stop()
	for {
		select {
		case e := <-events:
			sendEvent(send, e)
		case <-keepalive.C:
			fmt.Fprint(w, ": keepalive\n\n")
			rc.Flush()
		case d := <-done:
			// The run is over: what it said before is sent first.
			for len(events) > 0 {
				sendEvent(send, <-events)
			}
			if d.err != nil {
				if r.Context().Err() != nil {
					return // the browser went away: its run was cancelled
				}
				// The API's answer (the stream has begun: its headers,
				// Retry-After among them, cannot be sent).
				a := httpapi.AnswerError(d.err)
				a.Log(h.log, "console: playground run")
				send("error", map[string]any{"status": a.Status, "error": a.Doc.Error})
				return
			}
			send("result", map[string]any{"result": d.res, "preview_incomplete": dropped.Load()})
			return
		}
	}
}

func sendEvent(send func(string, any), e execapi.Event) {
	payload := map[string]any{"elapsed_ms": e.Elapsed.Milliseconds()}
	switch e.Kind {
	case execapi.EventStdout, execapi.EventStderr:
		// Bytes as they came (a chunk may end inside a character): the
		// page decodes each stream as one.
		payload["b64"] = e.Data
	case execapi.EventStarted, execapi.EventSubmitted:
	default:
		return
	}
	send(string(e.Kind), payload)
}

func (h *handlers) tooLarge(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	writeError(w, http.StatusRequestEntityTooLarge, httpapi.CodeBodyTooLarge,
		"the request is larger than this server's limit of "+strconv.FormatInt(h.cfg.MaxBodyBytes, 10)+" bytes")
}
