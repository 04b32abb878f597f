package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
)

// A streamed call with an Idempotency-Key whose client hangs up on the
// first chunk: the run goes on, its stream is kept, and the retry gets the
// whole stream replayed (the code ran once).
func TestIdempotentStreamReplayed(t *testing.T) {
	fake := execapitest.New("bash")
	release := make(chan struct{})
	ctxs := make(chan context.Context, 1)
	fake.Respond(func(ctx context.Context, _ execapitest.Call) execapitest.Response {
		ctxs <- ctx
		return execapitest.Response{Result: execapitest.Success("ready\n"), Release: release,
			Events: []execapi.Event{{Kind: execapi.EventStdout, Data: []byte("ready\n")}}}
	})
	logs, log := debugLogs()
	ts := startServer(t, serverOptions{fake: fake, log: log})
	_, key := ts.key("alice", 1000, 4)
	post := func(ctx context.Context) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/exec", strings.NewReader(quickBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set(IdempotencyKeyHeader, "stream-1")
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	ctx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	resp := post(ctx)
	readSSE(resp.Body, func(ev sseEvent) bool { return ev.name != "stdout" })
	hangUp()
	resp.Body.Close()
	waitFor(t, "the server to see the client gone", func() bool { return strings.Contains(logs.String(), "client went away") })
	if err := (<-ctxs).Err(); err != nil {
		t.Fatalf("the run was cancelled with its client: %v", err)
	}
	close(release)
	waitFor(t, "the run to end", func() bool { return len(fake.Calls()) == 1 && ts.srv.gate.calls.count() == 0 })

	resp = post(context.Background())
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get(IdempotencyReplayedHeader) != "true" {
		t.Fatalf("replay: %d %v", resp.StatusCode, resp.Header)
	}
	var evs []sseEvent
	if err := readSSE(resp.Body, func(ev sseEvent) bool { evs = append(evs, ev); return true }); err != nil {
		t.Fatal(err)
	}
	evs = checkStream(t, evs)
	if len(evs) != 3 || evs[0].name != "started" || evs[1].text(t) != "ready\n" || evs[2].name != "result" ||
		!strings.Contains(evs[2].data, `"stdout":"ready\n"`) {
		t.Errorf("replayed stream: %v", evs)
	}
	if n := len(fake.Ran()); n != 1 {
		t.Errorf("the code ran %d times", n)
	}
}

// goneClient is a client's writer after the client went away: every
// write and flush fails.
type goneClient struct{ header http.Header }

func (g goneClient) Header() http.Header       { return g.header }
func (g goneClient) WriteHeader(int)           {}
func (g goneClient) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }
func (g goneClient) FlushError() error         { return errors.New("broken pipe") }

// The tee keeps an answer whose client is gone, and tells its handler
// nothing failed, so that a stream goes on to its end rather than cancel
// the run; past its bound it keeps only that it overflowed.
func TestTeeWriterKeepsGoingWhenTheClientIsGone(t *testing.T) {
	tee := &teeWriter{w: goneClient{header: http.Header{}}, max: 8}
	tee.Header().Set("Content-Type", "text/event-stream")
	if n, err := tee.Write([]byte("abc")); n != 3 || err != nil {
		t.Errorf("write: %d, %v", n, err)
	}
	if err := http.NewResponseController(tee).Flush(); err != nil {
		t.Errorf("flush: %v", err)
	}
	tee.Write([]byte("def"))
	if tee.status != http.StatusOK || tee.contentType != "text/event-stream" || tee.buf.String() != "abcdef" || tee.overflow {
		t.Errorf("kept %d %q %q overflow %v", tee.status, tee.contentType, tee.buf.String(), tee.overflow)
	}
	tee.Write([]byte("ghi"))
	if !tee.overflow || tee.buf.Len() != 0 {
		t.Errorf("past the bound: overflow %v, %d bytes kept", tee.overflow, tee.buf.Len())
	}
}
