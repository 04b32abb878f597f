package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// refusalLog is a client-side transport that adds a caller's token and
// keeps the last answer that was not a success: what the SDK's client
// reduces to "Too Many Requests".
type refusalLog struct {
	token string
	mu    sync.Mutex
	last  *refusedAnswer
}

type refusedAnswer struct {
	status     int
	retryAfter string
	body       []byte
}

func (l *refusalLog) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+l.token)
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || resp.StatusCode/100 == 2 {
		return resp, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	l.mu.Lock()
	l.last = &refusedAnswer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: body}
	l.mu.Unlock()
	return resp, nil
}

// sessionServer serves HTTPHandler over a fake Service on loopback, behind
// the SDK's bearer middleware with two callers, alice and bob.
func sessionServer(t *testing.T, opts Options) (*httptest.Server, *sessions) {
	t.Helper()
	users := map[string]string{"token-of-alice-0001": "alice", "token-of-bob-000001": "bob"}
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if users[token] == "" {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: users[token]}, nil
	}
	h := HTTPHandler(fakeService(), opts).(*sessions)
	srv := httptest.NewServer(auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h))
	t.Cleanup(srv.Close)
	return srv, h
}

// open opens a session as the caller whose token this is.
func open(t *testing.T, srv *httptest.Server, token string) (*mcp.ClientSession, *refusalLog, error) {
	t.Helper()
	log := &refusalLog{token: token}
	client := mcp.NewClient(&mcp.Implementation{Name: "sessions-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: srv.URL, HTTPClient: &http.Client{Transport: log}, MaxRetries: -1,
	}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, log, err
}

// wantRefused checks the answer to a session refused for reason: status,
// Retry-After, and a JSON-RPC error that names the limit.
func wantRefused(t *testing.T, err error, log *refusalLog, status int, reason string, limit int) {
	t.Helper()
	if err == nil {
		t.Fatalf("a session beyond the limit %s was opened", reason)
	}
	log.mu.Lock()
	a := log.last
	log.mu.Unlock()
	if a == nil || a.status != status {
		t.Fatalf("refused %v: answer %+v, want status %d", err, a, status)
	}
	if n, err := strconv.Atoi(a.retryAfter); err != nil || n < 1 {
		t.Errorf("Retry-After %q, want whole seconds", a.retryAfter)
	}
	var doc struct {
		JSONRPC string `json:"jsonrpc"`
		ID      int    `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    struct {
				Reason      string `json:"reason"`
				Limit       int    `json:"limit"`
				RetryAfterS int    `json:"retry_after_s"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(a.body, &doc); err != nil || doc.JSONRPC != "2.0" || doc.ID == 0 {
		t.Fatalf("body %q is not a JSON-RPC error answering the initialize (%v)", a.body, err)
	}
	e := doc.Error
	if e.Code != codeSessionRefused || e.Data.Reason != reason || e.Data.Limit != limit ||
		strconv.Itoa(e.Data.RetryAfterS) != a.retryAfter || !strings.Contains(e.Message, strconv.Itoa(limit)+" sessions open") {
		t.Errorf("error %+v, want reason %s, limit %d, Retry-After %s", e, reason, limit, a.retryAfter)
	}
}

// A caller's sessions are bounded (the third of alice's is refused with
// 429 while bob still gets one), and so are the server's (bob's second,
// the fourth in all, gets 503); closing a session (the client's DELETE)
// gives its place back at once. Before these bounds one client opened
// 40,000 sessions in 20 s.
func TestSessionsBoundedPerCallerAndServer(t *testing.T) {
	srv, _ := sessionServer(t, Options{MaxSessions: 3, MaxSessionsPerCaller: 2})
	const alice, bob = "token-of-alice-0001", "token-of-bob-000001"
	first, _, err := open(t, srv, alice)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := open(t, srv, alice); err != nil {
		t.Fatal(err)
	}
	_, log, err := open(t, srv, alice)
	wantRefused(t, err, log, http.StatusTooManyRequests, RefusedSessionsPerCaller, 2)

	other, _, err := open(t, srv, bob)
	if err != nil {
		t.Fatalf("another caller's first session: %v", err)
	}
	if res, err := other.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolName,
		Arguments: map[string]any{"runtime": "bash", "code": "echo bob"}}); err != nil || res.IsError {
		t.Fatalf("a call in bob's session: %v %+v", err, res)
	}
	_, log, err = open(t, srv, bob)
	wantRefused(t, err, log, http.StatusServiceUnavailable, RefusedSessions, 3)

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := open(t, srv, alice); err != nil {
		t.Errorf("after alice closed a session, opening another: %v", err)
	}
}

// A session idle for Options.SessionTimeout is closed, and its place
// given back: the caller, at its limit of one, may open another, and the
// idle one is gone (404, which the client reports).
func TestIdleSessionsGiveTheirPlaceBack(t *testing.T) {
	// Short, but long enough for a client to send initialize and then
	// notifications/initialized (each POST restarts the SDK's timer).
	srv, h := sessionServer(t, Options{MaxSessionsPerCaller: 1, SessionTimeout: time.Second})
	released := make(chan struct{}, 1)
	h.released = func() {
		select {
		case released <- struct{}{}:
		default:
		}
	}
	const alice = "token-of-alice-0001"
	idle, _, err := open(t, srv, alice)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-released:
	case <-time.After(30 * time.Second): // only catches the hang
		t.Fatal("the idle session's place was never given back")
	}
	if _, _, err := open(t, srv, alice); err != nil {
		t.Errorf("after the idle session expired, opening another: %v", err)
	}
	if err := idle.Ping(context.Background(), nil); err == nil {
		t.Error("the expired session still answers")
	}
}
