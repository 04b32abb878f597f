package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
	"github.com/scratchrun/scratchrun/internal/store"
)

// A streamed call gets its events in the order the run gave them,
// numbered, started first, each chunk's text decoded as the result's
// stdout is (a character cut between chunks is sent whole, an invalid
// byte as U+FFFD), and then the result byte for byte as the JSON answer
// to the same call; it is recorded once.
func TestStreamEventsInOrder(t *testing.T) {
	fake := execapitest.New("bash")
	fake.Respond(func(context.Context, execapitest.Call) execapitest.Response {
		res := execapitest.Success("one\nx\xe2\x82\xac\xff\n")
		res.Stderr = "warn\n"
		return execapitest.Response{Result: res, Events: []execapi.Event{
			{Kind: execapi.EventStdout, Data: []byte("one\n")},
			{Kind: execapi.EventStderr, Data: []byte("warn\n")},
			{Kind: execapi.EventStdout, Data: []byte("x\xe2\x82")},
			{Kind: execapi.EventStdout, Data: []byte("\xac\xff\n")},
		}}
	})
	ts := startServer(t, serverOptions{fake: fake})
	k, key := ts.key("alice", 1000, 4)
	a, all := ts.streamAll(key, quickBody)
	if a.status != http.StatusOK || a.header.Get("Cache-Control") != "no-store" || a.header.Get("X-Accel-Buffering") != "no" {
		t.Fatalf("answer %d %v", a.status, a.header)
	}
	evs := checkStream(t, all)
	var got []string
	for _, ev := range evs[:len(evs)-1] {
		if ev.name == "started" {
			var s struct {
				ElapsedMS *int64 `json:"elapsed_ms"`
			}
			if json.Unmarshal([]byte(ev.data), &s) != nil || s.ElapsedMS == nil || *s.ElapsedMS < 0 {
				t.Errorf("started: %s", ev.data)
			}
			got = append(got, "started")
			continue
		}
		got = append(got, ev.name+":"+ev.text(t))
	}
	want := []string{"started", "stdout:one\n", "stderr:warn\n", "stdout:x", "stdout:€\uFFFD\n"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("events %q\nwant   %q", got, want)
	}
	last := evs[len(evs)-1]
	plain := ts.post(key, quickBody)
	if last.name != "result" || last.data+"\n" != string(plain.body) {
		t.Errorf("last event %s %s\nthe JSON answer %s", last.name, last.data, plain.body)
	}
	var res execapi.Result
	if err := json.Unmarshal([]byte(last.data), &res); err != nil || res.Stdout != "one\nx€\uFFFD\n" {
		t.Errorf("result %+v %v", res, err)
	}
	rows, _ := ts.keys.ListUsage(context.Background(), store.UsageFilter{KeyIDs: []string{k.ID}})
	if len(rows) != 2 || rows[0].Outcome != "success" || rows[1].Outcome != "success" {
		t.Errorf("usage rows of a streamed and a JSON call: %+v", rows)
	}
}

// What is refused before the run is admitted is answered as without
// streaming: its status, Retry-After and the JSON error document, and no
// event.
func TestStreamRefusalsKeepTheirStatus(t *testing.T) {
	ts := startServer(t, serverOptions{fake: scripted()})
	_, key := ts.key("alice", 1000, 4)
	_, slow := ts.key("slow", 1, 4)
	ts.streamAll(slow, quickBody) // spends its one run a minute
	for _, c := range []struct {
		name, key, body string
		status          int
		code            string
	}{
		{"invalid", key, `{"runtime": "bash", "code": "true", "limits": {"timeout_ms": -1}}`, http.StatusBadRequest, execapi.CodeInvalidRequest},
		{"unknown runtime", key, `{"runtime": "cobol", "code": "x"}`, http.StatusBadRequest, execapi.CodeInvalidRequest},
		{"no key", "", quickBody, http.StatusUnauthorized, CodeUnauthorized},
		{"key rate", slow, quickBody, http.StatusTooManyRequests, "rate_limited"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, evs := ts.streamAll(c.key, c.body)
			plain := ts.post(c.key, c.body)
			if a.status != c.status || evs != nil || a.header.Get("Content-Type") != "application/json" || a.errorBody(t).Code != c.code {
				t.Fatalf("answer %d %q %s, events %v; want %d %s", a.status, a.header.Get("Content-Type"), a.body, evs, c.status, c.code)
			}
			if plain.status != a.status || a.header.Get("Retry-After") != plain.header.Get("Retry-After") {
				t.Errorf("streamed %d (Retry-After %q), JSON %d (%q)", a.status, a.header.Get("Retry-After"), plain.status, plain.header.Get("Retry-After"))
			}
			if c.status == http.StatusTooManyRequests {
				retryAfter(t, a)
			}
		})
	}
}

// A call refused after waiting in the engine's queue is answered 429 with
// its JSON document too: the stream begins only once a run is admitted.
func TestStreamQueueWaitRefusal(t *testing.T) {
	sb, release := scriptedBackend()
	defer release()
	ts := startServer(t, serverOptions{capacity: 1, queueWait: 300 * time.Millisecond, backend: sb})
	_, key := ts.key("q", 1000, 10)
	held := make(chan answer, 1)
	go func() { held <- ts.post(key, `{"runtime": "bash", "code": "hold", "limits": {"timeout_ms": 20000}}`) }()
	waitFor(t, "the first run", func() bool { return ts.metric("scratchrun_sandboxes_in_use") == 1 })
	a, evs := ts.streamAll(key, quickBody)
	if a.status != http.StatusTooManyRequests || evs != nil || a.errorBody(t).Code != "at_capacity" {
		t.Fatalf("answer %d %s, events %v", a.status, a.body, evs)
	}
	retryAfter(t, a)
	release()
	if h := <-held; h.status != http.StatusOK {
		t.Errorf("the held run: %d %s", h.status, h.body)
	}
	// Admitted, the same call streams, the engine's events and all.
	a, all := ts.streamAll(key, `{"runtime": "bash", "code": "echo hi"}`)
	evs = checkStream(t, all)
	if a.status != http.StatusOK || len(evs) != 3 || evs[0].name != "started" || evs[1].name != "stdout" || evs[1].text(t) != "hi\n" || evs[2].name != "result" {
		t.Errorf("answer %d, events %v", a.status, evs)
	}
}

// A run that fails after the stream began ends it with an error event:
// the API's error document for that failure, as the JSON answer's body.
func TestStreamErrorAfterStart(t *testing.T) {
	fake := execapitest.New("bash")
	var fail error
	fake.Respond(func(context.Context, execapitest.Call) execapitest.Response {
		return execapitest.Response{Err: fail, Events: []execapi.Event{{Kind: execapi.EventStdout, Data: []byte("partial\n")}}}
	})
	ts := startServer(t, serverOptions{fake: fake})
	_, key := ts.key("alice", 1000, 4)
	for _, c := range []struct {
		err  error
		code string
	}{
		{errors.New("the sandbox broke"), execapi.CodeInternal},
		{&execapi.WorkerLostError{Worker: "w", Why: "gone"}, execapi.CodeWorkerLost},
	} {
		fail = c.err
		a, all := ts.streamAll(key, quickBody)
		evs := checkStream(t, all)
		if a.status != http.StatusOK || len(evs) != 3 || evs[0].name != "started" || evs[1].text(t) != "partial\n" || evs[2].name != "error" {
			t.Fatalf("answer %d, events %v", a.status, evs)
		}
		plain := ts.post(key, quickBody)
		if evs[2].data+"\n" != string(plain.body) || plain.errorBody(t).Code != c.code {
			t.Errorf("error event %s\nthe JSON answer %s", evs[2].data, plain.body)
		}
	}
}

// A quiet stream carries keep-alive comments until the run ends.
func TestStreamKeepAlive(t *testing.T) {
	defer func(d time.Duration) { streamKeepAlive = d }(streamKeepAlive)
	streamKeepAlive = 10 * time.Millisecond
	fake := execapitest.New("bash")
	release := make(chan struct{})
	fake.Respond(func(context.Context, execapitest.Call) execapitest.Response {
		return execapitest.Response{Result: execapitest.Success(""), Release: release}
	})
	ts := startServer(t, serverOptions{fake: fake})
	_, key := ts.key("alice", 1000, 4)
	resp, err := ts.streamPost(context.Background(), key, quickBody, "text/event-stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []string
	var once sync.Once
	err = readSSE(resp.Body, func(ev sseEvent) bool {
		got = append(got, ev.name+ev.comment)
		if ev.comment == "keep-alive" {
			once.Do(func() { close(release) })
		}
		return true
	})
	if err != nil || len(got) < 3 || got[0] != "started" || got[1] != "keep-alive" || got[len(got)-1] != "result" {
		t.Errorf("stream %q, %v", got, err)
	}
}

// Only a client that lists text/event-stream gets events; */*, other
// types and q=0 get today's JSON.
func TestStreamOnlyWhenAsked(t *testing.T) {
	for accept, want := range map[string]bool{
		"":                                    false,
		"*/*":                                 false,
		"text/*":                              false,
		"application/json":                    false,
		"text/event-stream;q=0":               false,
		"text/event-stream; q=0.0":            false,
		"text/event-stream":                   true,
		"Text/Event-Stream":                   true,
		"application/json, text/event-stream": true,
		"text/event-stream;q=0.5, */*;q=0.1":  true,
	} {
		if got := wantsEventStream([]string{accept}); got != want {
			t.Errorf("Accept %q: streams %v, want %v", accept, got, want)
		}
	}
	ts := startServer(t, serverOptions{fake: scripted()})
	_, key := ts.key("alice", 1000, 4)
	resp, err := ts.streamPost(context.Background(), key, `{"runtime": "bash", "code": "echo hi"}`, "application/json, */*")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || !bytes.Contains(body, []byte(`"stdout":"hi\n"`)) {
		t.Errorf("answer %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}

// A client that goes away mid-stream cancels its run (the service sees
// its context end), which is recorded once, as cancelled.
func TestStreamDisconnectCancelsTheRun(t *testing.T) {
	fake := execapitest.New("bash")
	ctxs := make(chan context.Context, 1)
	fake.Respond(func(ctx context.Context, _ execapitest.Call) execapitest.Response {
		ctxs <- ctx
		return execapitest.Response{Release: make(chan struct{}), Events: []execapi.Event{{Kind: execapi.EventStdout, Data: []byte("ready\n")}}}
	})
	ts := startServer(t, serverOptions{fake: fake})
	k, key := ts.key("alice", 1000, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := ts.streamPost(ctx, key, quickBody, "text/event-stream")
	if err != nil {
		t.Fatal(err)
	}
	readSSE(resp.Body, func(ev sseEvent) bool { return ev.name != "stdout" })
	cancel()
	resp.Body.Close()
	runCtx := <-ctxs
	select {
	case <-runCtx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the run was not cancelled when its client went away")
	}
	var rows []store.Usage
	waitFor(t, "the usage row", func() bool {
		rows, _ = ts.keys.ListUsage(context.Background(), store.UsageFilter{KeyIDs: []string{k.ID}})
		return len(rows) > 0
	})
	waitFor(t, "the call to leave the server", func() bool { return ts.srv.gate.calls.count() == 0 })
	rows, _ = ts.keys.ListUsage(context.Background(), store.UsageFilter{KeyIDs: []string{k.ID}})
	if len(rows) != 1 || rows[0].Outcome != "cancelled" || rows[0].ExitCode != -1 {
		t.Errorf("usage rows %+v, want one cancelled", rows)
	}
}

// A streamed run the server cuts short as it gives up draining ends with
// an error event that says so (draining), as the JSON answer's 503 does.
func TestStreamAbortEndsWithDraining(t *testing.T) {
	fake, release := holding()
	defer release()
	ts := startServer(t, serverOptions{fake: fake})
	ended := make(chan []sseEvent, 1)
	go func() {
		_, evs := ts.streamAll("", holdBody)
		ended <- evs
	}()
	waitFor(t, "the run", func() bool { return fake.InFlight() == 1 })
	ts.cancel()
	waitFor(t, "draining", func() bool { return ts.srv.drain.isDraining() })
	ts.srv.Abort()
	if err := ts.stop(); err != nil {
		t.Fatal(err)
	}
	evs := checkStream(t, <-ended)
	var doc ErrorDocument
	if len(evs) != 2 || evs[0].name != "started" || evs[1].name != "error" ||
		json.Unmarshal([]byte(evs[1].data), &doc) != nil || doc.Error.Code != execapi.CodeDraining {
		t.Errorf("events %v", evs)
	}
}
