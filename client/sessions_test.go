package client_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/client"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
	"github.com/scratchrun/scratchrun/internal/httpapi"
	"github.com/scratchrun/scratchrun/internal/store"
)

// sessionServer is the real HTTP server, sessions on, over a scripted
// service that holds them (no sandbox: the fast tier), with one key; it
// returns a client of it with that key (without retries, unless opts say),
// a client with another key, and the service.
func sessionServer(t *testing.T, opts ...client.Option) (*client.Client, *client.Client, *execapitest.Sessions) {
	t.Helper()
	fake := execapitest.New("bash", "python3.13")
	fake.Respond(func(_ context.Context, c execapitest.Call) execapitest.Response {
		return execapitest.Response{Result: execapitest.Success("ran: " + c.Checked.Code + "\n")}
	})
	sp := execapi.DefaultSessionPolicy()
	sp.Enabled = true
	held := execapitest.NewSessions(fake, sp)
	keys, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "keys.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keys.Close() })
	_, secret, err := keys.CreateKey(context.Background(), store.NewKey{Name: "client", RatePerMin: 1000, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := keys.CreateKey(context.Background(), store.NewKey{Name: "other", RatePerMin: 1000, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := httpapi.New(httpapi.Config{Service: held, Policy: fake.Policy(), Keys: keys, Sessions: httpapi.SessionsOffered(held)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	url := "http://" + ln.Addr().String()
	return client.New(url, secret, append([]client.Option{client.WithoutRetries()}, opts...)...), client.New(url, other, client.WithoutRetries()), held
}

// The client's session methods against the server's handlers: a session's
// whole life, its files binary-safe at a path that needs escaping, and
// the server's errors as the contract's.
func TestClientSessions(t *testing.T) {
	c, other, held := sessionServer(t)
	ctx := context.Background()
	info, err := c.OpenSession(ctx, client.SessionRequest{Runtime: "bash", IdleTTLMS: 60000})
	if err != nil || !execapi.IsSessionID(info.ID) || info.IdleTTLMS != 60000 {
		t.Fatalf("open: %+v, %v", info, err)
	}
	desc, err := c.Runtimes(ctx)
	if err != nil || desc.Sessions == nil || desc.Sessions.PerKey != 4 {
		t.Errorf("runtimes: %+v, %v", desc.Sessions, err)
	}
	list, err := c.Sessions(ctx)
	if err != nil || len(list) != 1 || list[0].ID != info.ID {
		t.Errorf("list: %+v, %v", list, err)
	}
	if got, err := c.Session(ctx, info.ID); err != nil || got.ID != info.ID || got.IdleTTLMS != 60000 || got.Runtime != "bash" {
		t.Errorf("look-up: %+v, %v", got, err)
	}
	if _, err := other.Session(ctx, info.ID); !errors.Is(err, execapi.ErrSessionNotFound) {
		t.Errorf("another key's look-up: %v", err)
	}
	res, err := c.RunInSession(ctx, info.ID, client.Request{Code: "echo hi"}, client.WithIdempotencyKey("cell-1"))
	if err != nil || res.Stdout != "ran: echo hi\n" || res.Session.ID != info.ID || res.StatePurged || res.Files == nil {
		t.Fatalf("run: %+v, %v", res, err)
	}

	data := []byte("\x00\x01binary\xff\xfe")
	const path = "/tmp/dir with space/é#?.bin"
	if err := c.WriteSessionFile(ctx, info.ID, path, data); err != nil {
		t.Fatal(err)
	}
	if got, _ := held.File(info.ID, path); !bytes.Equal(got, data) {
		t.Errorf("the session holds %q", got)
	}
	got, err := c.ReadSessionFile(ctx, info.ID, path)
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("read %q, %v", got, err)
	}
	if _, err := c.ReadSessionFile(ctx, info.ID, "/tmp/none"); !errors.Is(err, execapi.ErrSessionFileNotFound) {
		t.Errorf("a missing file: %v", err)
	}

	child, err := c.ForkSession(ctx, info.ID)
	if err != nil || child.ForkedFrom != info.ID {
		t.Fatalf("fork: %+v, %v", child, err)
	}
	held.FailForks(execapi.ErrForkUnsupported)
	if _, err := c.ForkSession(ctx, info.ID); !errors.Is(err, execapi.ErrForkUnsupported) {
		t.Errorf("fork unsupported: %v", err)
	}

	// Another key's client: the session is not there.
	if _, err := other.RunInSession(ctx, info.ID, client.Request{Code: "true"}); !errors.Is(err, execapi.ErrSessionNotFound) {
		t.Errorf("another key's run: %v", err)
	}
	var ae *client.APIError
	if _, err := other.CloseSession(ctx, info.ID); !errors.As(err, &ae) || ae.Status != 404 || ae.Code != client.CodeSessionNotFound {
		t.Errorf("another key's close: %v", err)
	}

	end, err := c.CloseSession(ctx, info.ID)
	if err != nil || end.Reason != execapi.EndDeleted || !end.StatePurged {
		t.Fatalf("close: %+v, %v", end, err)
	}
	_, err = c.RunInSession(ctx, info.ID, client.Request{Code: "true"})
	var ended *execapi.SessionEndedError
	if !errors.As(err, &ended) || ended.End.Reason != execapi.EndDeleted || !errors.As(err, &ae) || ae.Ended == nil {
		t.Errorf("a run after close: %v", err)
	}
	if _, err := c.Session(ctx, info.ID); !errors.As(err, &ended) || ended.End.Reason != execapi.EndDeleted {
		t.Errorf("a look-up after close: %v", err)
	}

	held.Lose(child.ID)
	var lost *execapi.SessionLostError
	if _, err := c.ReadSessionFile(ctx, child.ID, path); !errors.As(err, &lost) {
		t.Errorf("a lost session: %v", err)
	}
	if _, err := c.Session(ctx, child.ID); !errors.As(err, &lost) {
		t.Errorf("a lost session's look-up: %v", err)
	}

	// The key's maximum is a refusal the contract knows.
	for range 4 {
		if _, err := c.OpenSession(ctx, client.SessionRequest{Runtime: "bash"}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = c.OpenSession(ctx, client.SessionRequest{Runtime: "bash"})
	if !errors.Is(err, execapi.ErrSessionLimit) || !errors.Is(err, client.ErrRefused) {
		t.Errorf("past the key's maximum: %v", err)
	}
}

// countingTransport counts the requests a client sends.
type countingTransport struct{ n atomic.Int32 }

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// The key's maximum of sessions is not retried, however many retries the
// client allows: waiting frees none (the server sends no Retry-After),
// only closing one of the key's sessions does.
func TestSessionLimitIsNotRetried(t *testing.T) {
	counted := &countingTransport{}
	c, _, _ := sessionServer(t, client.WithHTTPClient(&http.Client{Transport: counted}), client.WithRetries(5, time.Minute))
	ctx := context.Background()
	for range 4 {
		if _, err := c.OpenSession(ctx, client.SessionRequest{Runtime: "bash"}); err != nil {
			t.Fatal(err)
		}
	}
	before := counted.n.Load()
	_, err := c.OpenSession(ctx, client.SessionRequest{Runtime: "bash"})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Code != client.CodeSessionLimit || !errors.Is(err, client.ErrRefused) || !errors.Is(err, execapi.ErrSessionLimit) {
		t.Fatalf("past the key's maximum: %v", err)
	}
	if n := counted.n.Load() - before; n != 1 {
		t.Errorf("%d requests for one session_limit answer, want 1 (not retried)", n)
	}
}
