package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// sseEvent is one server-sent event as a client reads it, or a comment.
type sseEvent struct {
	id      int
	name    string
	data    string
	comment string
}

func (e sseEvent) String() string {
	if e.name == "" {
		return ":" + e.comment
	}
	return fmt.Sprintf("%d %s %s", e.id, e.name, e.data)
}

// text is the text of a stdout or stderr event.
func (e sseEvent) text(t *testing.T) string {
	t.Helper()
	var c struct {
		Text *string `json:"text"`
	}
	if err := json.Unmarshal([]byte(e.data), &c); err != nil || c.Text == nil {
		t.Fatalf("%s event without text: %s (%v)", e.name, e.data, err)
	}
	return *c.Text
}

// readSSE reads a stream of server-sent events, giving each event (and
// comment) to each as it comes, until the stream ends or each says stop.
// It checks the framing the wire contract fixes: id, event and one data
// line, in that order.
func readSSE(r io.Reader, each func(sseEvent) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 32<<20)
	var ev sseEvent
	var fields []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if len(fields) == 0 {
				continue
			}
			if strings.Join(fields, ",") != "id,event,data" {
				return fmt.Errorf("event with fields %v, want id, event, data", fields)
			}
			if !each(ev) {
				return nil
			}
			ev, fields = sseEvent{}, nil
		case strings.HasPrefix(line, ":"):
			if !each(sseEvent{comment: strings.TrimSpace(line[1:])}) {
				return nil
			}
		default:
			name, value, ok := strings.Cut(line, ": ")
			if !ok {
				return fmt.Errorf("line %q is no field", line)
			}
			fields = append(fields, name)
			switch name {
			case "id":
				n, err := strconv.Atoi(value)
				if err != nil {
					return fmt.Errorf("id %q", value)
				}
				ev.id = n
			case "event":
				ev.name = value
			case "data":
				ev.data = value
			}
		}
	}
	if len(fields) != 0 {
		return fmt.Errorf("the stream ended inside an event (%v)", fields)
	}
	return sc.Err()
}

// streamPost sends body to /v1/exec asking for events; the caller reads
// and closes the answer's body.
func (ts *testServer) streamPost(ctx context.Context, key, body, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/exec", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return httpClient.Do(req)
}

// streamAll makes a streamed call and reads all of it: the answer (its
// body, for one that is no stream) and the events.
func (ts *testServer) streamAll(key, body string) (answer, []sseEvent) {
	ts.t.Helper()
	resp, err := ts.streamPost(context.Background(), key, body, "text/event-stream")
	if err != nil {
		ts.t.Fatalf("POST /v1/exec: %v", err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, header: resp.Header, closed: resp.Close}
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		a.body, err = io.ReadAll(resp.Body)
		if err != nil {
			ts.t.Fatal(err)
		}
		return a, nil
	}
	var evs []sseEvent
	if err := readSSE(resp.Body, func(ev sseEvent) bool { evs = append(evs, ev); return true }); err != nil {
		ts.t.Fatalf("reading the stream: %v (so far %v)", err, evs)
	}
	return a, evs
}

// checkStream checks what every run's stream holds: events numbered 1, 2,
// ... in order, started first, the result or an error last and only
// there. It returns the events without comments.
func checkStream(t *testing.T, evs []sseEvent) []sseEvent {
	t.Helper()
	var out []sseEvent
	for _, ev := range evs {
		if ev.name != "" {
			out = append(out, ev)
		}
	}
	for i, ev := range out {
		if ev.id != i+1 {
			t.Errorf("event %d has id %d: %v", i, ev.id, out)
		}
		last := ev.name == "result" || ev.name == "error"
		if last != (i == len(out)-1) {
			t.Errorf("%s at %d of %d events: %v", ev.name, i+1, len(out), out)
		}
	}
	return out
}
