package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	"github.com/pb33f/libopenapi-validator/content"
	liberrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel/high/base"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
	"github.com/scratchrun/scratchrun/internal/httpapi/openapi"
	"github.com/scratchrun/scratchrun/internal/store"
)

// docChecker validates real answers against the OpenAPI document with an
// independent validator (pb33f's libopenapi-validator) and counts which
// documented answers (operation, status, media type) were seen.
type docChecker struct {
	t          *testing.T
	v          validator.Validator
	errorDoc   *base.Schema
	documented []string

	mu   sync.Mutex
	seen map[string]bool
}

func newDocChecker(t *testing.T, sessions bool) *docChecker {
	t.Helper()
	doc, err := libopenapi.NewDocument(openapi.JSON(sessions))
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(doc, config.WithBodyDecoder("text/event-stream", content.DecoderFunc(decodeEventStream)))
	if len(errs) > 0 {
		t.Fatalf("the validator does not take the document: %v", errs)
	}
	if ok, errs := v.ValidateDocument(); !ok {
		t.Fatalf("the document is not valid OpenAPI: %s", validationErrors(errs))
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		t.Fatal(err)
	}
	c := &docChecker{t: t, v: v, errorDoc: model.Model.Components.Schemas.GetOrZero("ErrorDocument").Schema(), seen: map[string]bool{}}
	d := loadAPIDoc(t, sessions)
	for _, op := range d.operations() {
		method, path, _ := strings.Cut(op, " ")
		for status, r := range obj(d, "paths", path, strings.ToLower(method), "responses") {
			resp := r.(map[string]any)
			if ref, ok := resp["$ref"].(string); ok {
				resp = obj(d, "components", "responses", strings.TrimPrefix(ref, "#/components/responses/"))
			}
			for mt := range obj(resp, "content") {
				c.documented = append(c.documented, op+" "+status+" "+mt)
			}
		}
	}
	sort.Strings(c.documented)
	return c
}

// decodeEventStream reads a text/event-stream body as the document's
// Stream schema describes it: the list of its events, {id, event, data}
// each, data decoded; comment lines are no events. Any other line, a
// field given twice, or data that is not one JSON value fails it.
func decodeEventStream(in *content.DecodeInput) (any, error) {
	var events []any
	ev := map[string]any{}
	sc := bufio.NewScanner(in.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if len(ev) > 0 {
				events = append(events, ev)
				ev = map[string]any{}
			}
			continue
		case strings.HasPrefix(line, ":"):
			continue
		}
		name, value, ok := strings.Cut(line, ": ")
		if !ok {
			return nil, fmt.Errorf("event stream line %q is no field", line)
		}
		if _, twice := ev[name]; twice {
			return nil, fmt.Errorf("event field %s given twice", name)
		}
		switch name {
		case "id":
			n, err := strconv.Atoi(value)
			if err != nil {
				return nil, fmt.Errorf("event id %q: %v", value, err)
			}
			ev[name] = n
		case "event":
			ev[name] = value
		case "data":
			var data any
			if err := json.Unmarshal([]byte(value), &data); err != nil {
				return nil, fmt.Errorf("event data %q: %v", value, err)
			}
			ev[name] = data
		default:
			return nil, fmt.Errorf("event field %q", name)
		}
	}
	if len(ev) > 0 {
		return nil, errors.New("the stream ends inside an event")
	}
	return events, sc.Err()
}

func validationErrors(errs []*liberrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "\n  %s: %s", e.Message, e.Reason)
		for _, s := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n    %s at %s (%s)", s.Reason, s.FieldPath, s.KeywordLocation)
		}
	}
	return b.String()
}

// call sends a real request to ts and validates the real answer against
// the document: its status, headers and body.
func (c *docChecker) call(ts *testServer, method, path, key, body string, header map[string]string) answer {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, ts.URL+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	a := answer{status: resp.StatusCode, header: resp.Header, body: data, closed: resp.Close}
	if a.status == http.StatusMethodNotAllowed || a.status == http.StatusNotFound && !ownNotFound(data) {
		// No operation lists these: the document describes them in words.
		c.errorDocument(a)
		return a
	}
	if ok, errs := c.v.ValidateHttpResponse(req, resp); !ok {
		c.t.Errorf("%s %s answered %d %s, which the document does not describe:%s\n  body: %s", method, path, resp.StatusCode,
			resp.Header.Get("Content-Type"), validationErrors(errs), data)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	c.mu.Lock()
	c.seen[fmt.Sprintf("%s %s %d %s", method, docPath(path), resp.StatusCode, mt)] = true
	c.mu.Unlock()
	return a
}

// expect is call, failing the test unless the answer has status (and, for
// an error, code).
func (c *docChecker) expect(ts *testServer, status int, code, method, path, key, body string, header map[string]string) answer {
	c.t.Helper()
	a := c.call(ts, method, path, key, body, header)
	if a.status != status {
		c.t.Fatalf("%s %s: %d %s, want %d", method, path, a.status, a.body, status)
	}
	if code != "" {
		if got := a.errorBody(c.t).Code; got != code {
			c.t.Fatalf("%s %s: code %s, want %s", method, path, got, code)
		}
	}
	return a
}

// errorDocument validates an answer the document describes only in words
// (404, 405: no operation lists them) against its ErrorDocument schema.
func (c *docChecker) errorDocument(a answer) {
	c.t.Helper()
	sv := schema_validation.NewSchemaValidator()
	if ok, errs := sv.ValidateSchemaBytesWithVersion(c.errorDoc, a.body, 3.1); !ok {
		c.t.Errorf("%d %s is no ErrorDocument:%s", a.status, a.body, validationErrors(errs))
	}
}

// missing lists the documented answers not seen.
func (c *docChecker) missing() []string {
	var out []string
	for _, d := range c.documented {
		if !c.seen[d] {
			out = append(out, d)
		}
	}
	return out
}

// openAPIService scripts the answers the validation test needs, by code:
// "hold" lasts until released, "echo X" prints X (as an event too),
// "fail" fails (500), "lost" loses its worker (502), "noworkers" is
// refused for want of workers (503); anything else succeeds.
func openAPIService() (*execapitest.Service, func()) {
	fake := execapitest.New("bash", "python3.13")
	release := make(chan struct{})
	fake.Respond(func(_ context.Context, c execapitest.Call) execapitest.Response {
		code := c.Checked.Code
		switch {
		case code == "hold":
			return execapitest.Response{Result: execapitest.Success("held\n"), Release: release}
		case strings.HasPrefix(code, "echo "):
			out := code[len("echo "):] + "\n"
			return execapitest.Response{Result: execapitest.Success(out), Events: []execapi.Event{{Kind: execapi.EventStdout, Data: []byte(out)}}}
		case code == "fail":
			return execapitest.Response{Err: errors.New("the sandbox could not be set up")}
		case code == "lost":
			return execapitest.Response{Err: &execapi.WorkerLostError{Worker: "w1", Why: "no word from it for 4s"}}
		case code == "noworkers":
			return execapitest.Response{Err: &execapi.Refusal{Reason: execapi.RefusedNoWorkers, RetryAfter: 2 * time.Second}}
		}
		return execapitest.Response{Result: execapitest.Success("")}
	})
	var once sync.Once
	return fake, func() { once.Do(func() { close(release) }) }
}

func execBody(code string) string {
	data, _ := json.Marshal(map[string]string{"runtime": "bash", "code": code})
	return string(data)
}

// Every status the document gives every route is produced by real
// requests to a real server, and each real answer (status, headers, body;
// a stream's events) is valid against the document. The front end runs
// over a scripted service, and over the real engine's admission (on a
// scripted sandbox backend) for at_capacity.
// It runs with sessions off and on, each against the document that mode
// serves.
func TestOpenAPIValidatesEveryRealAnswer(t *testing.T) {
	bothModes(t, validatesEveryRealAnswer)
}

func validatesEveryRealAnswer(t *testing.T, sessions bool) {
	c := newDocChecker(t, sessions)
	const exec, runtimes = "/v1/exec", "/v1/runtimes"
	foreign := map[string]string{"Origin": "https://elsewhere.example"}
	sse := map[string]string{"Accept": "text/event-stream"}

	fake, release := openAPIService()
	defer release()
	rs := &readyService{Service: fake}
	var served execapi.Service = rs
	var holder *execapitest.Sessions
	if sessions {
		holder = execapitest.NewSessions(fake, testSessionPolicy())
		served = &readySessions{Sessions: holder, ready: rs}
	}
	ts := startServer(t, serverOptions{maxBody: 4096, fake: fake, wrap: func(*execapitest.Service) execapi.Service { return served }, sessions: sessions})
	owner, key := ts.key("main", 1000, 10)
	rate, rateKey := ts.key("rate", 1, 10)
	_, oneKey := ts.key("one", 1000, 1)

	// POST /v1/exec
	c.expect(ts, 200, "", "POST", exec, key, execBody("echo hi"), nil)
	a := c.expect(ts, 200, "", "POST", exec, key, execBody("echo streamed"), sse)
	if !strings.Contains(string(a.body), "event: stdout\ndata: {\"text\":\"streamed\\n\"}") || !strings.Contains(string(a.body), "event: result") {
		t.Errorf("stream without its output and result:\n%s", a.body)
	}
	a = c.expect(ts, 200, "", "POST", exec, key, execBody("fail"), sse)
	if !strings.Contains(string(a.body), "event: error") {
		t.Errorf("failed stream without its error event:\n%s", a.body)
	}
	idem := map[string]string{"Idempotency-Key": "openapi-1"}
	first := c.expect(ts, 200, "", "POST", exec, key, execBody("echo once"), idem)
	again := c.expect(ts, 200, "", "POST", exec, key, execBody("echo once"), idem)
	if again.header.Get("Idempotency-Replayed") != "true" || string(again.body) != string(first.body) {
		t.Errorf("repeat with the same key: %s %q, want the first answer replayed", again.body, again.header.Get("Idempotency-Replayed"))
	}
	c.expect(ts, 409, CodeIdempotencyKeyReused, "POST", exec, key, execBody("echo twice"), idem)
	// An entry its server left running (it stopped mid-run) long ago.
	stale := execBody("echo lost")
	sum := sha256.Sum256([]byte(stale))
	if _, _, err := ts.keys.ClaimIdempotency(context.Background(), store.IdempotencyClaim{Caller: owner.ID, Key: "openapi-stale",
		BodyHash: hex.EncodeToString(sum[:]), At: time.Now().Add(-time.Hour), Window: IdempotencyWindow}); err != nil {
		t.Fatal(err)
	}
	c.expect(ts, 409, CodeIdempotencyUnknown, "POST", exec, key, stale, map[string]string{"Idempotency-Key": "openapi-stale"})

	bad := c.expect(ts, 400, execapi.CodeInvalidRequest, "POST", exec, key, `{"runtime": "bash", "code": "x", "limits": {"timeout_ms": 99999}}`, nil)
	if bad.errorBody(t).Field != "limits.timeout_ms" {
		t.Errorf("400 names %q, want limits.timeout_ms", bad.errorBody(t).Field)
	}
	bad = c.expect(ts, 400, execapi.CodeInvalidRequest, "POST", exec, key, execBody("true"), map[string]string{"Idempotency-Key": "two words"})
	if bad.errorBody(t).Field != IdempotencyKeyHeader {
		t.Errorf("400 names %q, want %s", bad.errorBody(t).Field, IdempotencyKeyHeader)
	}
	bad = c.expect(ts, 400, execapi.CodeInvalidRequest, "POST", exec, key, `{"runtime": "cobol", "code": "x"}`, nil)
	if e := bad.errorBody(t); e.Field != "runtime" || e.Reason != string(execapi.RefusedUnknownRuntime) {
		t.Errorf("unknown runtime: %+v", e)
	}
	c.expect(ts, 401, CodeUnauthorized, "POST", exec, "", execBody("true"), nil)
	c.expect(ts, 403, CodeForbidden, "POST", exec, key, execBody("true"), foreign)
	c.expect(ts, 413, CodeBodyTooLarge, "POST", exec, key, execBody(strings.Repeat("x", 5000)), nil)
	c.expect(ts, 415, CodeMediaType, "POST", exec, key, execBody("true"), map[string]string{"Content-Type": "text/plain"})
	c.expect(ts, 200, "", "POST", exec, rateKey, execBody("true"), nil)
	a = c.expect(ts, 429, execapi.CodeRateLimited, "POST", exec, rateKey, execBody("true"), nil)
	refusedAs(t, a, 429, execapi.RefusedKeyRate, 1)
	retryAfter(t, a)
	held := make(chan answer, 1)
	go func() { held <- c.call(ts, "POST", exec, oneKey, execBody("hold"), nil) }()
	waitFor(t, "the held run", func() bool { return fake.InFlight() == 1 })
	a = c.expect(ts, 429, execapi.CodeConcurrencyLimit, "POST", exec, oneKey, execBody("true"), nil)
	refusedAs(t, a, 429, execapi.RefusedKeyConcurrency, 1)
	retryAfter(t, a)
	c.expect(ts, 500, execapi.CodeInternal, "POST", exec, key, execBody("fail"), nil)
	c.expect(ts, 502, execapi.CodeWorkerLost, "POST", exec, key, execBody("lost"), nil)
	a = c.expect(ts, 503, execapi.CodeNoWorkers, "POST", exec, key, execBody("noworkers"), nil)
	refusedAs(t, a, 503, execapi.RefusedNoWorkers, 0)

	// The other routes.
	c.expect(ts, 200, "", "GET", runtimes, key, "", nil)
	c.expect(ts, 401, CodeUnauthorized, "GET", runtimes, "", "", nil)
	c.expect(ts, 403, CodeForbidden, "GET", runtimes, key, "", foreign)
	for _, path := range []string{"/v1/openapi.json", "/healthz", "/readyz"} {
		c.expect(ts, 200, "", "GET", path, "", "", nil)
		c.expect(ts, 403, CodeForbidden, "GET", path, "", "", foreign)
	}
	if sessions {
		validatesSessionAnswers(t, c, ts, holder, key, rateKey, rate.ID)
	}
	doc := c.expect(ts, 200, "", "GET", "/v1/openapi.json", "", "", nil)
	if string(doc.body) != string(openapi.JSON(sessions)) {
		t.Error("GET /v1/openapi.json is not the document of its mode")
	}
	notReady := errors.New("no worker is live")
	rs.ready.Store(&notReady)
	c.expect(ts, 503, CodeNotReady, "GET", "/readyz", "", "", nil)
	fake.FailDescribe(errors.New("the image store could not be read"))
	c.expect(ts, 500, execapi.CodeInternal, "GET", runtimes, key, "", nil)

	// What no operation lists: an unknown path, another method.
	a = c.call(ts, "GET", "/v2/nothing", key, "", nil)
	if a.status != 404 || a.errorBody(t).Code != CodeNotFound {
		t.Errorf("unknown path: %d %s", a.status, a.body)
	}
	a = c.call(ts, "GET", exec, key, "", nil)
	if a.status != 405 || a.errorBody(t).Code != CodeMethodNotAllowed || a.header.Get("Allow") != "POST" {
		t.Errorf("GET /v1/exec: %d %s, Allow %q", a.status, a.body, a.header.Get("Allow"))
	}
	release()
	<-held

	// at_capacity: the engine's admission has no room.
	sb, releaseSB := scriptedBackend()
	defer releaseSB()
	// (On the engine, whose sessions are not this package's: sessions off.)
	full := startServer(t, serverOptions{capacity: 1, queueWait: -1, backend: sb})
	fullHeld := make(chan answer, 1)
	go func() { fullHeld <- c.call(full, "POST", exec, "", execBody("hold"), nil) }()
	waitFor(t, "the held run", func() bool { return full.eng.Admission().Running == 1 })
	a = c.expect(full, 429, execapi.CodeAtCapacity, "POST", exec, "", execBody("true"), nil)
	refusedAs(t, a, 429, execapi.RefusedAtCapacity, 0)
	retryAfter(t, a)
	releaseSB()
	<-fullHeld

	// A draining server.
	dfake, drelease := holding()
	defer drelease()
	draining := startServer(t, serverOptions{fake: dfake, sessions: sessions})
	var open execapi.SessionInfo
	if sessions {
		open = draining.openSession("", `{"runtime":"bash"}`)
	}
	drained := make(chan answer, 1)
	go func() { drained <- c.call(draining, "POST", exec, "", holdBody, nil) }()
	waitFor(t, "the held run", func() bool { return dfake.InFlight() == 1 })
	draining.cancel()
	waitFor(t, "draining", func() bool { return draining.srv.drain.isDraining() })
	if sessions {
		c.expect(draining, 503, execapi.CodeDraining, "POST", "/v1/sessions", "", `{"runtime":"bash"}`, nil)
		c.expect(draining, 503, execapi.CodeDraining, "POST", "/v1/sessions/"+open.ID+"/exec", "", execBody("true"), nil)
	}
	c.expect(draining, 503, execapi.CodeDraining, "POST", exec, "", execBody("true"), nil)
	c.expect(draining, 503, execapi.CodeDraining, "GET", runtimes, "", "", nil)
	c.expect(draining, 503, execapi.CodeDraining, "GET", "/readyz", "", "", nil)
	drelease()
	if a := <-drained; a.status != 200 {
		t.Errorf("the run accepted before the drain: %d %s", a.status, a.body)
	}

	if m := c.missing(); len(m) > 0 {
		t.Errorf("documented answers no request produced:\n  %s", strings.Join(m, "\n  "))
	}
}
