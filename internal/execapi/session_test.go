package execapi

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// A session request is checked against the call policy and the session
// bounds, every error naming its field; what is absent takes the
// operator's defaults.
func TestValidateSession(t *testing.T) {
	p, sp := DefaultPolicy(), DefaultSessionPolicy()
	p.AllowEgress = true
	c, err := sp.ValidateSession(p, SessionRequest{Runtime: "python3.13"})
	if err != nil {
		t.Fatal(err)
	}
	want := CheckedSession{Runtime: "python3.13", MemoryMB: 256, Timeout: 10 * time.Second, Network: NetworkNone,
		IdleTTL: 10 * time.Minute, Lifetime: time.Hour, Env: map[string]string{}}
	if c.Runtime != want.Runtime || c.MemoryMB != want.MemoryMB || c.Timeout != want.Timeout || c.Network != want.Network ||
		c.IdleTTL != want.IdleTTL || c.Lifetime != want.Lifetime || len(c.Env) != 0 {
		t.Errorf("defaults: %+v, want %+v", c, want)
	}
	// A session may hold more memory than a call (up to its own maximum),
	// and choose its TTLs within the bounds.
	c, err = sp.ValidateSession(p, SessionRequest{Runtime: "bash", Limits: Limits{MemoryMB: 1024, TimeoutMS: 30000}, Network: NetworkEgress,
		IdleTTLMS: 60000, MaxLifetimeMS: 600000, Env: map[string]string{"A": "1"}})
	if err != nil || c.MemoryMB != 1024 || c.Timeout != 30*time.Second || c.Network != NetworkEgress || c.IdleTTL != time.Minute ||
		c.Lifetime != 10*time.Minute || c.Env["A"] != "1" {
		t.Errorf("chosen: %+v %v", c, err)
	}
	for _, b := range []struct {
		req   SessionRequest
		field string
	}{
		{SessionRequest{}, "runtime"},
		{SessionRequest{Runtime: "Python"}, "runtime"},
		{SessionRequest{Runtime: "bash", Limits: Limits{MemoryMB: 1025}}, "limits.memory_mb"},
		{SessionRequest{Runtime: "bash", Limits: Limits{MemoryMB: 32}}, "limits.memory_mb"},
		{SessionRequest{Runtime: "bash", Limits: Limits{TimeoutMS: 30001}}, "limits.timeout_ms"},
		{SessionRequest{Runtime: "bash", Network: "lan"}, "network"},
		{SessionRequest{Runtime: "bash", Env: map[string]string{"1X": ""}}, `env["1X"]`},
		{SessionRequest{Runtime: "bash", IdleTTLMS: 9999}, "idle_ttl_ms"},
		{SessionRequest{Runtime: "bash", IdleTTLMS: 3600001}, "idle_ttl_ms"},
		{SessionRequest{Runtime: "bash", MaxLifetimeMS: 3600001}, "max_lifetime_ms"},
		{SessionRequest{Runtime: "bash", MaxLifetimeMS: -1}, "max_lifetime_ms"},
	} {
		_, err := sp.ValidateSession(p, b.req)
		var v *ValidationError
		if !errors.As(err, &v) || v.Field != b.field {
			t.Errorf("%+v: %v, want an error naming %s", b.req, err, b.field)
		}
	}
	// The operator's session maximum holds even below a call's, and the
	// default is kept within it.
	small := sp
	small.MaxMemoryMB = 128
	if _, err := small.ValidateSession(p, SessionRequest{Runtime: "bash", Limits: Limits{MemoryMB: 256}}); err == nil || !strings.HasPrefix(err.Error(), "limits.memory_mb: ") {
		t.Errorf("256 MB with a session maximum of 128: %v", err)
	}
	if c, err := small.ValidateSession(p, SessionRequest{Runtime: "bash"}); err != nil || c.MemoryMB != 128 {
		t.Errorf("the default with a session maximum of 128: %+v %v", c, err)
	}
	p.AllowEgress = false
	if _, err := sp.ValidateSession(p, SessionRequest{Runtime: "bash", Network: NetworkEgress}); err == nil || !strings.HasPrefix(err.Error(), "network: ") {
		t.Errorf("egress where it is not allowed: %v", err)
	}
}

// On the wire an absent duration is the default and an explicit 0 is
// refused naming it, as for a call's limits.
func TestSessionRequestJSON(t *testing.T) {
	var r SessionRequest
	if err := json.Unmarshal([]byte(`{"runtime":"bash","limits":{"memory_mb":300},"idle_ttl_ms":60000,"env":{"A":"b"}}`), &r); err != nil ||
		r.Runtime != "bash" || r.Limits.MemoryMB != 300 || r.IdleTTLMS != 60000 || r.MaxLifetimeMS != 0 || r.Env["A"] != "b" {
		t.Errorf("decoded %+v %v", r, err)
	}
	for body, field := range map[string]string{
		`{"runtime":"bash","idle_ttl_ms":0}`:          "idle_ttl_ms",
		`{"runtime":"bash","max_lifetime_ms":0}`:      "max_lifetime_ms",
		`{"runtime":"bash","limits":{"memory_mb":0}}`: "limits.memory_mb",
	} {
		var v *ValidationError
		if err := json.Unmarshal([]byte(body), &r); !errors.As(err, &v) || v.Field != field {
			t.Errorf("%s: %v, want an error naming %s", body, err, field)
		}
	}
}

// A call into a session takes the session's runtime, network and memory;
// it may repeat them but not change them, and its own timeout and Env
// stand over the session's.
func TestValidateInSession(t *testing.T) {
	p := DefaultPolicy()
	s := SessionInfo{ID: NewSessionID(), Runtime: "python3.13", Network: NetworkNone, Limits: Limits{MemoryMB: 1024, TimeoutMS: 20000}}
	base := map[string]string{"A": "session", "B": "session"}
	c, err := p.ValidateInSession(Request{Code: "x = 1", Env: map[string]string{"B": "call"}}, s, base)
	if err != nil || c.Runtime != "python3.13" || c.Network != NetworkNone || c.MemoryMB != 1024 || c.Timeout != 20*time.Second ||
		c.Env["A"] != "session" || c.Env["B"] != "call" {
		t.Errorf("in session: %+v %v", c, err)
	}
	if base["B"] != "session" {
		t.Error("the session's env was changed by a call")
	}
	c, err = p.ValidateInSession(Request{Runtime: "python3.13", Code: "x", Network: NetworkNone, Limits: Limits{MemoryMB: 1024, TimeoutMS: 1000}}, s, nil)
	if err != nil || c.Timeout != time.Second || c.MemoryMB != 1024 {
		t.Errorf("repeating the session's settings: %+v %v", c, err)
	}
	// Another runtime (of the session's image: the engine's to check).
	if c, err := p.ValidateInSession(Request{Runtime: "bash", Code: "pip install x"}, s, nil); err != nil || c.Runtime != "bash" {
		t.Errorf("bash in a python session: %+v %v", c, err)
	}
	for _, b := range []struct {
		req   Request
		field string
	}{
		{Request{Runtime: "Bash", Code: "x"}, "runtime"},
		{Request{Code: "x", Network: NetworkEgress}, "network"},
		{Request{Code: "x", Limits: Limits{MemoryMB: 256}}, "limits.memory_mb"},
		{Request{Code: "x", Limits: Limits{TimeoutMS: 30001}}, "limits.timeout_ms"},
		{Request{Code: ""}, "code"},
	} {
		_, err := p.ValidateInSession(b.req, s, nil)
		var v *ValidationError
		if !errors.As(err, &v) || v.Field != b.field {
			t.Errorf("%+v: %v, want an error naming %s", b.req, err, b.field)
		}
	}
}

// Session ids are the prefix and 128 random bits, never the same twice,
// and a front end can tell one from any other text.
func TestSessionIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := NewSessionID()
		if !IsSessionID(id) || seen[id] || len(id) != 30 || !strings.HasPrefix(id, "ses_") {
			t.Fatalf("id %q (seen %v)", id, seen[id])
		}
		seen[id] = true
	}
	id := NewSessionID()
	for _, bad := range []string{"", "ses_", id[:len(id)-1], id + "a", strings.ToUpper(id), "key_" + id[4:], id[:10] + "1" + id[11:], id[:10] + "/" + id[11:]} {
		if IsSessionID(bad) {
			t.Errorf("%q taken for a session id", bad)
		}
	}
}

// A session's expiry is the sooner of its idle end and its lifetime's end.
func TestExpiry(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := Expiry(t0, 10*time.Minute, t0.Add(time.Hour)); !got.Equal(t0.Add(10 * time.Minute)) {
		t.Errorf("idle first: %v", got)
	}
	if got := Expiry(t0.Add(55*time.Minute), 10*time.Minute, t0.Add(time.Hour)); !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("lifetime first: %v", got)
	}
}

// Session errors read alike for every unknown id, say what ended a session
// and that its state is gone, and map to one code each.
func TestSessionErrors(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.FixedZone("x", 3600))
	for _, c := range []struct {
		err   error
		code  string
		words []string
	}{
		{ErrSessionNotFound, CodeSessionNotFound, []string{"no such session"}},
		{&SessionEndedError{End: SessionEnd{Reason: EndIdleTTL, At: at}}, CodeSessionEnded, []string{"idle TTL", "2026-05-01T11:00:00Z", "state are gone"}},
		{&SessionEndedError{End: SessionEnd{Reason: EndMemoryPressure, At: at}}, CodeSessionEnded, []string{"while idle to free memory"}},
		{&SessionEndedError{End: SessionEnd{Reason: "later", At: at}}, CodeSessionEnded, []string{"(later)"}},
		{&SessionLostError{Worker: "w1", Why: "no word"}, CodeSessionLost, []string{"lost with its worker", "did not run"}},
		{&SessionLostError{Worker: "w1", MayHaveRun: true}, CodeSessionLost, []string{"lost with its worker", "may have run"}},
		{errors.New("other"), "", nil},
	} {
		if got := SessionErrorCode(c.err); got != c.code {
			t.Errorf("%v: code %q, want %q", c.err, got, c.code)
		}
		for _, w := range c.words {
			if !strings.Contains(c.err.Error(), w) {
				t.Errorf("%q does not say %q", c.err, w)
			}
		}
	}
	lost := &SessionLostError{Worker: "w1", Why: "no word for 4s"}
	if strings.Contains(lost.Error(), "w1") || !strings.Contains(lost.Detail(), "w1") {
		t.Errorf("the worker is for logs, not callers: %q / %q", lost.Error(), lost.Detail())
	}
	// Every reason has its own words.
	for _, r := range []SessionEndReason{EndDeleted, EndIdleTTL, EndMaxLifetime, EndMemoryLimit, EndMemoryPressure, EndTimeoutUnseparable,
		EndSandboxLost, EndOperator, EndServerShutdown, EndServerRestart} {
		if strings.HasPrefix(r.sentence(), "it ended (") {
			t.Errorf("%s has no words of its own: %q", r, r.sentence())
		}
	}
}

// The worker that holds a session is for routing only: never on the wire.
func TestSessionInfoJSON(t *testing.T) {
	data, err := json.Marshal(SessionInfo{ID: "ses_x", Worker: "w1"})
	if err != nil || strings.Contains(string(data), "w1") || !strings.Contains(string(data), `"expires_at"`) || strings.Contains(string(data), "forked_from") {
		t.Errorf("%s %v", data, err)
	}
}

// A session request body is read by the rules of a call's: a key twice or
// in another case is refused naming it, a wrong type names its field.
func TestDecodeSessionRequest(t *testing.T) {
	r, err := DecodeSessionRequest(strings.NewReader(`{"runtime":"bash","max_lifetime_ms":60000,"extra":1}`), 1<<10)
	if err != nil || r.Runtime != "bash" || r.MaxLifetimeMS != 60000 {
		t.Errorf("%+v %v", r, err)
	}
	for body, field := range map[string]string{
		`{"runtime":"bash","IDLE_TTL_MS":60000}`:        "IDLE_TTL_MS",
		`{"runtime":"bash","limits":{"MEMORY_MB":300}}`: "limits.MEMORY_MB",
		`{"runtime":"bash","runtime":"node20"}`:         "runtime",
		`{"runtime":"bash","idle_ttl_ms":"10m"}`:        "idle_ttl_ms",
		`{"runtime":"bash","limits":{"memory_mb":0}}`:   "limits.memory_mb",
		`{"runtime":"bash"} {}`:                         "body",
	} {
		_, err := DecodeSessionRequest(strings.NewReader(body), 1<<10)
		var v *ValidationError
		if !errors.As(err, &v) || v.Field != field {
			t.Errorf("%s: %v, want an error naming %s", body, err, field)
		}
	}
}

// A call in a session that goes on keeps its sandbox: StatePurged is false
// and no teardown is reported unverified. One that ended the session
// reports the session's teardown and why it ended; a restarted interpreter
// and dropped output between calls are said.
func TestFinishInSession(t *testing.T) {
	r := SessionResult{Result: Result{ExitCode: 0, StatePurged: true}, Session: SessionCallInfo{ID: "ses_x", Interpreter: InterpreterKept}}
	r.FinishInSession()
	if r.StatePurged || r.Note != "" || r.Outcome != OutcomeOf(0, r.Facts) {
		t.Errorf("a call in a session that goes on: purged %v, note %q", r.StatePurged, r.Note)
	}
	r = SessionResult{Session: SessionCallInfo{Interpreter: InterpreterRestarted, BetweenCallsOutputBytes: 12}}
	r.FinishInSession()
	if !strings.Contains(r.Note, "started a fresh one") || !strings.Contains(r.Note, "12 bytes of output") || strings.Contains(r.Note, "Teardown") {
		t.Errorf("restarted: %q", r.Note)
	}
	r = SessionResult{Result: Result{ExitCode: ExitKilled}, Session: SessionCallInfo{Ended: &SessionEnd{Reason: EndMemoryLimit, StatePurged: true}}}
	r.FinishInSession()
	if !r.StatePurged || !strings.Contains(r.Note, "The session has ended: its processes reached its memory limit") || strings.Contains(r.Note, "Teardown") {
		t.Errorf("ended, purged: %v %q", r.StatePurged, r.Note)
	}
	r = SessionResult{Session: SessionCallInfo{Ended: &SessionEnd{Reason: EndMaxLifetime}}}
	r.FinishInSession()
	if r.StatePurged || !strings.Contains(r.Note, "Teardown of the sandbox could not be verified") || !strings.Contains(r.Note, "maximum lifetime") {
		t.Errorf("ended, not verified: %v %q", r.StatePurged, r.Note)
	}
	// A plain call's Finish is as it was.
	plain := Result{}
	plain.Finish()
	if !strings.Contains(plain.Note, "Teardown of the sandbox could not be verified") {
		t.Errorf("a plain call: %q", plain.Note)
	}
	data, _ := json.Marshal(SessionResult{Session: SessionCallInfo{ID: "ses_x"}})
	if !strings.Contains(string(data), `"exit_code":0`) || !strings.Contains(string(data), `"session":{"id":"ses_x"`) {
		t.Errorf("wire shape: %s", data)
	}
}
