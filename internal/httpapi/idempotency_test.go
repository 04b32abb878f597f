package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
	"github.com/scratchrun/scratchrun/internal/store"
	"github.com/scratchrun/scratchrun/internal/testenv/postgres"
)

// Idempotent retries over the scripted service: what the contract of
// Idempotency-Key says, front end alone.

const echoBody = `{"runtime": "bash", "code": "echo once"}`

// postKey sends body to /v1/exec with an Idempotency-Key.
func (ts *testServer) postKey(ctx context.Context, key, idem, body string) (answer, error) {
	return ts.do(ctx, http.MethodPost, "/v1/exec", key, strings.NewReader(body), map[string]string{IdempotencyKeyHeader: idem})
}

func (ts *testServer) mustPostKey(key, idem, body string) answer {
	ts.t.Helper()
	a, err := ts.postKey(context.Background(), key, idem, body)
	if err != nil {
		ts.t.Fatalf("POST /v1/exec: %v", err)
	}
	return a
}

// held is a scripted service whose runs print "held" and last until
// release is called; ctxs are the contexts of its runs.
type held struct {
	fake    *execapitest.Service
	release chan struct{}
	mu      sync.Mutex
	ctxs    []context.Context
}

func newHeld() *held {
	h := &held{fake: execapitest.New("bash"), release: make(chan struct{})}
	h.fake.Respond(func(ctx context.Context, c execapitest.Call) execapitest.Response {
		h.mu.Lock()
		h.ctxs = append(h.ctxs, ctx)
		h.mu.Unlock()
		return execapitest.Response{Result: execapitest.Success("held\n"), Release: h.release}
	})
	return h
}

func (h *held) runCtx(i int) context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ctxs[i]
}

// debugLogs is a server log that the test can wait on.
func debugLogs() (*syncBuffer, *slog.Logger) {
	logs := &syncBuffer{}
	return logs, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func hashOf(body string) string {
	sum := sha256.Sum256([]byte(body))
	return hex.EncodeToString(sum[:])
}

// A repeat with the same key and body gets the first answer, marked as
// replayed, and the code ran once; another body with the key is a 409
// naming the header, and runs nothing.
func TestIdempotentReplay(t *testing.T) {
	ts := startServer(t, serverOptions{fake: scripted()})
	_, key := ts.key("idem", 100, 4)
	first := ts.mustPostKey(key, "retry-1", echoBody)
	if first.status != http.StatusOK || !strings.Contains(string(first.body), `"stdout":"once\n"`) || first.header.Get(IdempotencyReplayedHeader) != "" {
		t.Fatalf("first: %d %s %v", first.status, first.body, first.header)
	}
	again := ts.mustPostKey(key, "retry-1", echoBody)
	if again.status != first.status || !bytes.Equal(again.body, first.body) || again.header.Get(IdempotencyReplayedHeader) != "true" ||
		again.header.Get("Content-Type") != "application/json" {
		t.Fatalf("replay: %d %s %v; first %s", again.status, again.body, again.header, first.body)
	}
	if n := len(ts.fake.Ran()); n != 1 {
		t.Errorf("the code ran %d times", n)
	}

	other := ts.mustPostKey(key, "retry-1", `{"runtime": "bash", "code": "echo twice"}`)
	if d := other.errorBody(t); other.status != http.StatusConflict || d.Code != CodeIdempotencyKeyReused ||
		!strings.HasPrefix(d.Message, "Idempotency-Key: ") || !strings.Contains(d.Message, "24h0m0s") {
		t.Errorf("another body: %d %s", other.status, other.body)
	}
	// Without the header nothing changes: it runs every time.
	ts.post(key, echoBody)
	if n := len(ts.fake.Ran()); n != 2 {
		t.Errorf("%d runs after a call without the header, want 2", n)
	}
}

// Bad values of the header are a 400 naming it, before anything is kept
// or run.
func TestIdempotencyKeyInvalid(t *testing.T) {
	ts := startServer(t, serverOptions{fake: scripted()})
	_, key := ts.key("idem", 100, 4)
	for name, v := range map[string]string{
		"empty": "", "too long": strings.Repeat("k", 256), "space": "a b", "non-ASCII": "clé", "tab": "a\tb",
	} {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/exec", strings.NewReader(echoBody))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		req.Header[IdempotencyKeyHeader] = []string{v}
		if name == "empty" {
			req.Header[IdempotencyKeyHeader] = []string{"one", "two"} // and two values
		}
		checkInvalidKey(t, name, req)
		if name == "empty" {
			req, _ = http.NewRequest(http.MethodPost, ts.URL+"/v1/exec", strings.NewReader(echoBody))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			req.Header[IdempotencyKeyHeader] = []string{""}
			checkInvalidKey(t, name, req)
		}
	}
	if ok := ts.mustPostKey(key, strings.Repeat("~", 255), echoBody); ok.status != http.StatusOK {
		t.Errorf("a key of 255 visible characters: %d %s", ok.status, ok.body)
	}
	if n := len(ts.fake.Ran()); n != 1 {
		t.Errorf("%d runs, want only the valid key's", n)
	}
}

func checkInvalidKey(t *testing.T, name string, req *http.Request) {
	t.Helper()
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	a.status = resp.StatusCode
	a.body, _ = io.ReadAll(resp.Body)
	d := a.errorBody(t)
	if a.status != http.StatusBadRequest || d.Code != execapi.CodeInvalidRequest || d.Field != IdempotencyKeyHeader ||
		!strings.HasPrefix(d.Message, "Idempotency-Key: ") {
		t.Errorf("%s: %d %s", name, a.status, a.body)
	}
}

// A request refused before it ran (an invalid one, one the engine refused
// at capacity) keeps no entry: a retry with the key runs.
func TestIdempotentRefusalKeepsNothing(t *testing.T) {
	fake := scripted()
	var refuse sync.Once
	inner := fake
	fake = execapitest.New("bash")
	fake.Respond(func(ctx context.Context, c execapitest.Call) execapitest.Response {
		var resp *execapitest.Response
		refuse.Do(func() {
			resp = &execapitest.Response{Err: &execapi.Refusal{Reason: execapi.RefusedAtCapacity, RetryAfter: time.Second}}
		})
		if resp != nil {
			return *resp
		}
		res, err := inner.ExecChecked(ctx, c.Checked, nil)
		return execapitest.Response{Result: res, Err: err}
	})
	ts := startServer(t, serverOptions{fake: fake})
	k, key := ts.key("idem", 100, 4)

	if a := ts.mustPostKey(key, "k-429", echoBody); a.status != http.StatusTooManyRequests {
		t.Fatalf("first call: %d %s", a.status, a.body)
	}
	if _, err := ts.keys.IdempotencyEntry(context.Background(), k.ID, "k-429"); !errors.Is(err, store.ErrIdempotencyNotFound) {
		t.Errorf("entry after a refusal: %v", err)
	}
	if a := ts.mustPostKey(key, "k-429", echoBody); a.status != http.StatusOK || a.header.Get(IdempotencyReplayedHeader) != "" {
		t.Errorf("retry after a refusal: %d %s", a.status, a.body)
	}

	bad := `{"runtime": "bash", "code": "true", "limits": {"timeout_ms": -1}}`
	if a := ts.mustPostKey(key, "k-400", bad); a.status != http.StatusBadRequest {
		t.Fatalf("invalid call: %d %s", a.status, a.body)
	}
	if _, err := ts.keys.IdempotencyEntry(context.Background(), k.ID, "k-400"); !errors.Is(err, store.ErrIdempotencyNotFound) {
		t.Errorf("entry after a 400: %v", err)
	}
	if a := ts.mustPostKey(key, "k-400", echoBody); a.status != http.StatusOK {
		t.Errorf("the key again, valid: %d %s", a.status, a.body)
	}
	if n := len(fake.Ran()); n != 2 {
		t.Errorf("%d runs, want the two retries", n)
	}
}

// A client that goes away mid-run cancels nothing: the run goes on, the
// retry waits for it and gets its answer, and the code ran once.
func TestIdempotentDisconnectRunGoesOn(t *testing.T) {
	h := newHeld()
	logs, log := debugLogs()
	ts := startServer(t, serverOptions{fake: h.fake, log: log})
	_, key := ts.key("idem", 100, 4)

	ctx, hangUp := context.WithCancel(context.Background())
	firstDone := make(chan error, 1)
	go func() {
		_, err := ts.postKey(ctx, key, "drop-1", echoBody)
		firstDone <- err
	}()
	waitFor(t, "the run to start", func() bool { return h.fake.InFlight() == 1 })
	hangUp()
	if err := <-firstDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the first call ended with %v, want its own cancellation", err)
	}
	waitFor(t, "the server to see the client gone", func() bool { return strings.Contains(logs.String(), "client went away") })
	if err := h.runCtx(0).Err(); err != nil {
		t.Fatalf("the run was cancelled with its client: %v", err)
	}

	// A retry that gives up waiting kills nothing either.
	waiting := func(n int) func() bool {
		return func() bool { return strings.Count(logs.String(), "waiting for the first request") == n }
	}
	wctx, giveUp := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := ts.postKey(wctx, key, "drop-1", echoBody)
		gaveUp <- err
	}()
	waitFor(t, "the first retry to wait", waiting(1))
	giveUp()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("the retry that gave up: %v", err)
	}

	retry := make(chan answer, 1)
	go func() { retry <- ts.mustPostKey(key, "drop-1", echoBody) }()
	waitFor(t, "the retry to wait", waiting(2))
	if err := h.runCtx(0).Err(); err != nil {
		t.Fatalf("the run was cancelled with a retry that gave up: %v", err)
	}
	close(h.release)
	a := <-retry
	if a.status != http.StatusOK || !strings.Contains(string(a.body), `"stdout":"held\n"`) || a.header.Get(IdempotencyReplayedHeader) != "true" {
		t.Fatalf("retry: %d %s %v", a.status, a.body, a.header)
	}
	ran := h.fake.Ran()
	if len(ran) != 1 || ran[0].Err != nil {
		t.Errorf("runs: %+v", ran)
	}
}

// Two front ends on one PostgreSQL database: the retry that lands on the
// other one waits for the first's run and gets its answer; the other front
// end runs nothing.
func TestIdempotentRetryOnAnotherFrontEnd(t *testing.T) {
	db := postgres.Shared(t).NewDatabase(t)
	ha, hb := newHeld(), newHeld()
	logsB, logB := debugLogs()
	a := startServer(t, serverOptions{fake: ha.fake, db: db})
	b := startServer(t, serverOptions{fake: hb.fake, db: db, log: logB})
	_, key := a.key("idem", 100, 4)

	first := make(chan answer, 1)
	go func() { first <- a.mustPostKey(key, "fe-1", echoBody) }()
	waitFor(t, "the run on a", func() bool { return ha.fake.InFlight() == 1 })
	retry := make(chan answer, 1)
	go func() { retry <- b.mustPostKey(key, "fe-1", echoBody) }()
	waitFor(t, "the retry on b to wait", func() bool { return strings.Contains(logsB.String(), "waiting for the first request") })
	close(ha.release)
	fa, rb := <-first, <-retry
	if fa.status != http.StatusOK || rb.status != http.StatusOK || !bytes.Equal(fa.body, rb.body) || rb.header.Get(IdempotencyReplayedHeader) != "true" {
		t.Fatalf("first on a: %d %s; retry on b: %d %s %v", fa.status, fa.body, rb.status, rb.body, rb.header)
	}
	if na, nb := len(ha.fake.Ran()), len(hb.fake.Ran()); na != 1 || nb != 0 {
		t.Errorf("a ran %d, b ran %d; want 1 and 0", na, nb)
	}
}

// An entry left running past the longest a run can take (its server died
// mid-run) answers idempotency_unknown, after the wait: never a second run.
func TestIdempotentStuckEntryIsUnknown(t *testing.T) {
	ts := startServer(t, serverOptions{fake: scripted(), idemWait: 300 * time.Millisecond})
	k, key := ts.key("idem", 100, 4)
	// What a server that died mid-run leaves behind.
	if _, claimed, err := ts.keys.ClaimIdempotency(context.Background(), store.IdempotencyClaim{
		Caller: k.ID, Key: "stuck", BodyHash: hashOf(echoBody), At: time.Now(), Window: IdempotencyWindow}); !claimed || err != nil {
		t.Fatal(claimed, err)
	}
	a := ts.mustPostKey(key, "stuck", echoBody)
	if d := a.errorBody(t); a.status != http.StatusConflict || d.Code != CodeIdempotencyUnknown ||
		d.Message != "Idempotency-Key: the first request with this key ended without an answer (its server stopped); the code may have run" {
		t.Errorf("stuck entry: %d %s", a.status, a.body)
	}
	if n := len(ts.fake.Ran()); n != 0 {
		t.Errorf("the code ran %d times", n)
	}
}

// Keys are per caller: another key's same Idempotency-Key is an entry of
// its own, and runs.
func TestIdempotencyPerCaller(t *testing.T) {
	ts := startServer(t, serverOptions{fake: scripted()})
	_, one := ts.key("one", 100, 4)
	_, two := ts.key("two", 100, 4)
	for _, key := range []string{one, two} {
		if a := ts.mustPostKey(key, "shared", echoBody); a.status != http.StatusOK || a.header.Get(IdempotencyReplayedHeader) != "" {
			t.Errorf("%d %s %v", a.status, a.body, a.header)
		}
	}
	if n := len(ts.fake.Ran()); n != 2 {
		t.Errorf("%d runs for two callers", n)
	}
}

// A run that failed once it had started (the sandbox broke) may have run
// the code: its answer is kept and replayed, and it is not run again.
func TestIdempotentFailedRunIsKept(t *testing.T) {
	fake := execapitest.New("bash")
	fake.Respond(func(context.Context, execapitest.Call) execapitest.Response {
		return execapitest.Response{Err: errors.New("the sandbox broke")}
	})
	ts := startServer(t, serverOptions{fake: fake})
	_, key := ts.key("idem", 100, 4)
	first := ts.mustPostKey(key, "broke", echoBody)
	again := ts.mustPostKey(key, "broke", echoBody)
	if first.status != http.StatusInternalServerError || again.status != first.status || !bytes.Equal(again.body, first.body) ||
		again.header.Get(IdempotencyReplayedHeader) != "true" {
		t.Fatalf("first %d %s; again %d %s %v", first.status, first.body, again.status, again.body, again.header)
	}
	if n := len(fake.Calls()); n != 1 {
		t.Errorf("the code was sent %d times", n)
	}
}

// An answer larger than an entry keeps goes to its client whole; a retry
// learns that the code ran, and it is not run again.
func TestIdempotentAnswerTooLargeToKeep(t *testing.T) {
	fake := execapitest.New("bash")
	big := strings.Repeat("x", store.MaxIdempotentBody)
	fake.Respond(func(context.Context, execapitest.Call) execapitest.Response {
		return execapitest.Response{Result: execapitest.Success(big)}
	})
	ts := startServer(t, serverOptions{fake: fake})
	_, key := ts.key("idem", 100, 4)
	if first := ts.mustPostKey(key, "big", echoBody); first.status != http.StatusOK || len(first.body) <= store.MaxIdempotentBody {
		t.Fatalf("first: %d, %d bytes", first.status, len(first.body))
	}
	again := ts.mustPostKey(key, "big", echoBody)
	if d := again.errorBody(t); again.status != http.StatusConflict || d.Code != CodeIdempotencyUnknown ||
		!strings.Contains(d.Message, "ran its code") || again.header.Get(IdempotencyReplayedHeader) != "true" {
		t.Errorf("retry: %d %s", again.status, again.body)
	}
	if n := len(fake.Ran()); n != 1 {
		t.Errorf("the code ran %d times", n)
	}
}

// A worker lost after its go reports no event before its first frame: the
// call went to the service, so its code may have run, and a retry gets
// the 502 again rather than a second run. A refusal the service gives
// (no worker has room) ran nothing, and a retry may run it.
func TestIdempotentLostWorkerIsKept(t *testing.T) {
	fake := execapitest.New("bash")
	var refuse atomic.Bool
	refuse.Store(true)
	fake.Respond(func(context.Context, execapitest.Call) execapitest.Response {
		if refuse.Swap(false) {
			return execapitest.Response{Err: &execapi.Refusal{Reason: execapi.RefusedNoWorkers}, NoEvents: true}
		}
		return execapitest.Response{Err: &execapi.WorkerLostError{Worker: "w1"}, NoEvents: true}
	})
	ts := startServer(t, serverOptions{fake: fake})
	_, key := ts.key("idem", 100, 4)
	if refused := ts.mustPostKey(key, "lost", echoBody); refused.status != http.StatusServiceUnavailable {
		t.Fatalf("a refusal: %d %s", refused.status, refused.body)
	}
	first := ts.mustPostKey(key, "lost", echoBody)
	again := ts.mustPostKey(key, "lost", echoBody)
	if first.status != http.StatusBadGateway || again.status != first.status || !bytes.Equal(again.body, first.body) ||
		again.header.Get(IdempotencyReplayedHeader) != "true" {
		t.Fatalf("first %d %s; again %d %s %v", first.status, first.body, again.status, again.body, again.header)
	}
	if n := len(fake.Calls()); n != 2 {
		t.Errorf("the service was called %d times, want 2 (the refusal, then the lost run)", n)
	}
}
