package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/store"
)

// Idempotent retries of POST /v1/exec and the session routes' POSTs: a request with an Idempotency-Key
// runs at most once per caller and key within IdempotencyWindow, and a
// repeat with the same body gets the first one's answer. The entries live
// in the key store (store.ClaimIdempotency), so that a retry landing on
// another front end sharing the database finds them. A claim is written
// before the run is admitted: of two requests with one key exactly one
// runs, and a server that dies mid-run leaves an entry that answers
// idempotency_unknown, never a second run.

// Idempotency headers.
const (
	// IdempotencyKeyHeader names a request's key.
	IdempotencyKeyHeader = "Idempotency-Key"
	// IdempotencyReplayedHeader marks an answer replayed from an entry.
	IdempotencyReplayedHeader = "Idempotency-Replayed"
)

// IdempotencyWindow is how long an entry is kept from its first request.
const IdempotencyWindow = 24 * time.Hour

// maxIdempotencyKey bounds a key's length.
const maxIdempotencyKey = 255

// Idempotency poll intervals: a waiting retry reads the entry this often,
// from the first to the last (doubling), so that a short run is answered
// soon and a long one costs few reads.
const (
	idemPollFirst = 25 * time.Millisecond
	idemPollMax   = time.Second
)

// idempotencyStore is what idempotent retries need of the key store
// (store.Store's: see there).
type idempotencyStore interface {
	ClaimIdempotency(ctx context.Context, c store.IdempotencyClaim) (store.IdempotencyEntry, bool, error)
	IdempotencyEntry(ctx context.Context, caller, key string) (store.IdempotencyEntry, error)
	FinishIdempotency(ctx context.Context, caller, key string, status int, contentType string, body []byte) error
	ReleaseIdempotency(ctx context.Context, caller, key string) error
}

// idemRun is in the context of a request that holds a claim; the gate marks
// it just before it hands the call to the service, from which on the code
// may run (a cluster's front end reports no event between sending a
// worker the go and the worker's first frame, so events cannot say it).
type idemRun struct{ called atomic.Bool }

type idemRunKey struct{}

// markCalled notes, for a request holding an idempotency claim, that its
// call went to the service.
func markCalled(ctx context.Context) {
	if r, ok := ctx.Value(idemRunKey{}).(*idemRun); ok {
		r.called.Store(true)
	}
}

// isRefusal reports whether an answer is a refusal: a document naming
// its reason, which only an *execapi.Refusal's answer does, and which
// says that nothing ran.
func isRefusal(body []byte) bool {
	var doc struct {
		Error struct {
			Reason string `json:"reason"`
		} `json:"error"`
	}
	return json.Unmarshal(body, &doc) == nil && doc.Error.Reason != ""
}

// idempotencyKey checks the header's value: one, of 1 to 255 visible ASCII
// characters.
func idempotencyKey(values []string) (string, error) {
	invalid := func(msg string) error {
		return &execapi.ValidationError{Field: IdempotencyKeyHeader, Message: msg}
	}
	if len(values) != 1 {
		return "", invalid(fmt.Sprintf("give one key, not %d", len(values)))
	}
	v := values[0]
	if len(v) == 0 || len(v) > maxIdempotencyKey {
		return "", invalid(fmt.Sprintf("must be 1 to %d characters, not %d", maxIdempotencyKey, len(v)))
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x21 || v[i] > 0x7e {
			return "", invalid(fmt.Sprintf("must be visible ASCII characters (0x21-0x7E); byte %d is 0x%02X", i, v[i]))
		}
	}
	return v, nil
}

// idempotent wraps the exec handler: without the header the request goes
// straight through; with it, the first request with a key runs (detached
// from its client, its answer kept) and the others get that answer.
func (s *Server) idempotent(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		values := r.Header.Values(IdempotencyKeyHeader)
		if len(values) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		key, err := idempotencyKey(values)
		if err != nil {
			s.m.rejections.add(reasonInvalidRequest)
			writeInvalid(w, err)
			return
		}
		if !isJSON(r.Header.Get("Content-Type")) && !(r.URL.Path != "/v1/exec" && r.ContentLength == 0) {
			// Its 415 runs nothing and keeps nothing. (A fork takes an
			// empty body, sent without a type.)
			next.ServeHTTP(w, r)
			return
		}
		body, ok := s.readBody(w, r)
		if !ok {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		claim := store.IdempotencyClaim{Caller: execapi.CallerFrom(r.Context()), Key: key,
			BodyHash: requestHash(r, body), At: time.Now(), Window: IdempotencyWindow}
		// A first request refused meanwhile releases its entry: the claim
		// is made again, a bounded number of times.
		for range 8 {
			// Not under the client's context: a claim cancelled while its
			// commit went through would leave an entry nothing runs.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.cfg.RecordTimeout)
			e, claimed, err := s.cfg.Keys.ClaimIdempotency(cctx, claim)
			cancel()
			if err != nil {
				s.idemStoreFailed(w, r, err)
				return
			}
			if claimed {
				s.runClaimed(w, r, next, claim)
				return
			}
			if e.BodyHash != claim.BodyHash {
				writeError(w, http.StatusConflict, CodeIdempotencyKeyReused, fmt.Sprintf(
					"%s: this key was used with another request body in the last %s", IdempotencyKeyHeader, IdempotencyWindow))
				return
			}
			e, err = s.awaitIdempotent(r.Context(), e)
			switch {
			case err == nil:
				writeReplay(w, e)
				return
			case errors.Is(err, store.ErrIdempotencyNotFound):
				continue
			case errors.Is(err, errIdemUnknown):
				writeError(w, http.StatusConflict, CodeIdempotencyUnknown, IdempotencyKeyHeader+
					": the first request with this key ended without an answer (its server stopped); the code may have run")
				return
			case r.Context().Err() != nil:
				return // the client gave up waiting; nothing of the run is touched
			case errors.Is(err, errIdemDraining):
				s.refuseDraining(w)
				return
			default:
				s.idemStoreFailed(w, r, err)
				return
			}
		}
		s.idemStoreFailed(w, r, errors.New("the entry was released again and again while this request waited"))
	})
}

// requestHash is what an entry is bound to: the body, and the route (its
// method and path) for every route but /v1/exec, so that one key and one
// body sent to two sessions (the same code run in each) never get the
// first one's answer. /v1/exec's stays the body's alone, as its entries
// made before the session routes existed are.
func requestHash(r *http.Request, body []byte) string {
	h := sha256.New()
	if r.URL.Path != "/v1/exec" {
		fmt.Fprintf(h, "%s %s\n", r.Method, r.URL.Path)
	}
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// readBody reads the whole body within the server's limit (answering 413
// or 400 itself when it cannot): it is hashed before it is decoded.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	limit := s.cfg.MaxBodyBytes
	if r.ContentLength > limit {
		drainRefused(r)
		s.tooLarge(w)
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if tooLarge := new(http.MaxBytesError); errors.As(err, &tooLarge) {
			s.tooLarge(w)
			return nil, false
		}
		s.m.rejections.add(reasonInvalidRequest)
		writeInvalid(w, &execapi.ValidationError{Field: "body", Message: "could not be read: " + err.Error()})
		return nil, false
	}
	return body, true
}

func (s *Server) idemStoreFailed(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return
	}
	s.log.Error("idempotency entry", "err", err)
	writeError(w, http.StatusInternalServerError, execapi.CodeInternal, IdempotencyKeyHeader+": the key store could not be read or written; this request ran nothing")
}

var (
	// errIdemUnknown is an entry running past the longest a run can take.
	errIdemUnknown = errors.New("idempotency entry running past its bound")
	// errIdemDraining is a wait cut short by the server giving up its drain.
	errIdemDraining = errors.New("the server is cancelling its runs")
)

// awaitIdempotent waits for a running entry to be done (polling the
// store) and returns it; or store.ErrIdempotencyNotFound when its request
// was refused and released it; errIdemUnknown once it has been running
// longer than a run can take (its server stopped mid-run); ctx's error
// when the client gives up.
func (s *Server) awaitIdempotent(ctx context.Context, e store.IdempotencyEntry) (store.IdempotencyEntry, error) {
	deadline := e.Created.Add(s.idemWait)
	poll := idemPollFirst
	if !e.Done {
		s.log.Debug("waiting for the first request with this Idempotency-Key", "key", e.Caller)
	}
	for !e.Done {
		wait := time.Until(deadline)
		if wait <= 0 {
			return store.IdempotencyEntry{}, errIdemUnknown
		}
		t := time.NewTimer(min(poll, wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return store.IdempotencyEntry{}, ctx.Err()
		case <-s.runs.Done():
			t.Stop()
			return store.IdempotencyEntry{}, errIdemDraining
		case <-t.C:
		}
		poll = min(2*poll, idemPollMax)
		var err error
		if e, err = s.cfg.Keys.IdempotencyEntry(ctx, e.Caller, e.Key); err != nil {
			return store.IdempotencyEntry{}, err
		}
	}
	return e, nil
}

// runClaimed runs the request that holds the claim, detached from its
// client (a disconnect cancels nothing: the run goes on to its own timeout,
// and the server's drain or abort still cancels it through the gate), and
// keeps its answer: or, when it was refused before anything ran, releases
// the claim so that a retry may run it.
func (s *Server) runClaimed(w http.ResponseWriter, r *http.Request, next http.Handler, claim store.IdempotencyClaim) {
	run := &idemRun{}
	ctx := context.WithValue(context.WithoutCancel(r.Context()), idemRunKey{}, run)
	tee := &teeWriter{w: w, max: store.MaxIdempotentBody}
	defer context.AfterFunc(r.Context(), func() {
		s.log.Debug("client went away; its run goes on for its Idempotency-Key", "key", claim.Caller)
	})()
	next.ServeHTTP(tee, r.WithContext(ctx))
	status, called := tee.status, run.called.Load()
	// A 4xx is the caller's (bad input, its key, its limits): nothing ran.
	// A 5xx or no answer ran nothing when the call never reached the
	// service (the key store failed), or when the service refused it (a
	// refusal, draining or no worker, names its reason). Any other 5xx
	// may have run: a worker lost after its go, a sandbox that failed.
	ran := status != 0 && status < 400 ||
		(status >= 500 || status == 0) && called && !isRefusal(tee.buf.Bytes())
	rctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.cfg.RecordTimeout)
	defer cancel()
	if !ran {
		if err := s.cfg.Keys.ReleaseIdempotency(rctx, claim.Caller, claim.Key); err != nil {
			// The entry stays running: a retry gets idempotency_unknown
			// once the bound passes, never a second run.
			s.log.Error("idempotency entry not released", "key", claim.Caller, "err", err)
		}
		return
	}
	contentType, body := tee.contentType, tee.buf.Bytes()
	switch {
	case status == 0:
		// The handler wrote nothing for a run that went ahead.
		status, contentType = http.StatusConflict, "application/json"
		body = errorJSON(CodeIdempotencyUnknown, IdempotencyKeyHeader+
			": the first request with this key ended without an answer; the code may have run")
	case status == http.StatusServiceUnavailable:
		// A drain cancelled the run: replaying the 503 would tell a client
		// to try again, which must not run the code a second time.
		status, contentType = http.StatusConflict, "application/json"
		body = errorJSON(CodeIdempotencyUnknown, IdempotencyKeyHeader+
			": the first request with this key was cut short by its server's shutdown; the code may have run")
	case tee.overflow:
		status, contentType = http.StatusConflict, "application/json"
		body = errorJSON(CodeIdempotencyUnknown, fmt.Sprintf("%s: the first request with this key ran its code, but its answer was larger than the %d MiB kept for retries",
			IdempotencyKeyHeader, store.MaxIdempotentBody>>20))
	}
	if err := s.cfg.Keys.FinishIdempotency(rctx, claim.Caller, claim.Key, status, contentType, body); err != nil {
		s.log.Error("idempotent answer not stored", "key", claim.Caller, "err", err)
	}
}

// errorJSON is the error document as writeError sends it.
func errorJSON(code, message string) []byte {
	data, _ := json.Marshal(document(code, message))
	return append(data, '\n')
}

// writeReplay answers with an entry's answer.
func writeReplay(w http.ResponseWriter, e store.IdempotencyEntry) {
	h := w.Header()
	if e.ContentType != "" {
		h.Set("Content-Type", e.ContentType)
	}
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(e.Body)))
	h.Set(IdempotencyReplayedHeader, "true")
	w.WriteHeader(e.Status)
	w.Write(e.Body)
}

// teeWriter sends an answer to its client and keeps a copy (up to max
// bytes; past it, only that it overflowed). Once a write to the client
// fails (it went away), the rest is kept and not sent.
type teeWriter struct {
	w           http.ResponseWriter
	max         int
	status      int
	contentType string
	buf         bytes.Buffer
	overflow    bool
	gone        bool
}

// Header implements http.ResponseWriter.
func (t *teeWriter) Header() http.Header { return t.w.Header() }

// WriteHeader implements http.ResponseWriter.
func (t *teeWriter) WriteHeader(code int) {
	if t.status != 0 {
		return
	}
	t.status = code
	t.contentType = t.w.Header().Get("Content-Type")
	if code != 0 {
		t.w.WriteHeader(code)
	}
}

// Write implements http.ResponseWriter.
func (t *teeWriter) Write(p []byte) (int, error) {
	if t.status == 0 {
		t.WriteHeader(http.StatusOK)
	}
	if !t.overflow {
		if t.buf.Len()+len(p) > t.max {
			t.overflow = true
			t.buf = bytes.Buffer{}
		} else {
			t.buf.Write(p)
		}
	}
	if !t.gone {
		// A client gone without a reset (a dropped network) would block
		// the write until TCP gives up, and with it the run's answer,
		// which its retry waits for: a write that stalls ends the client.
		http.NewResponseController(t.w).SetWriteDeadline(time.Now().Add(teeWriteStall))
		if _, err := t.w.Write(p); err != nil {
			t.gone = true
		}
	}
	return len(p), nil
}

// teeWriteStall is how long a write to an idempotent request's client may
// block before the client counts as gone.
const teeWriteStall = 30 * time.Second

// FlushError sends what is buffered (a stream's events) while the client
// is there (http.ResponseController finds it).
func (t *teeWriter) FlushError() error {
	if !t.gone {
		rc := http.NewResponseController(t.w)
		rc.SetWriteDeadline(time.Now().Add(teeWriteStall))
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			t.gone = true
		}
	}
	return nil
}

// Flush implements http.Flusher as FlushError does.
func (t *teeWriter) Flush() { t.FlushError() }

// Unwrap is the client's writer, for http.ResponseController.
func (t *teeWriter) Unwrap() http.ResponseWriter { return t.w }
