package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/store"
)

// Without a console, /console says how to turn it on; with one, the console
// gets its requests without an API key (it signs its users in itself), but
// only from where GuardOrigin allows.
func TestConsoleRoute(t *testing.T) {
	off := startServer(t, serverOptions{fake: scripted()})
	off.key("someone", 60, 2)
	for _, path := range []string{"/console", "/console/", "/console/api/keys"} {
		a, err := off.do(context.Background(), http.MethodGet, path, "", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if a.status != http.StatusNotFound || !strings.Contains(a.errorBody(t).Message, "--console-token") {
			t.Errorf("GET %s without a console: %d %s", path, a.status, a.body)
		}
	}

	var mu sync.Mutex
	var reached []string
	on := startServer(t, serverOptions{fake: scripted(), console: func(execapi.Service, func() Live) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			reached = append(reached, r.URL.Path)
			mu.Unlock()
			w.WriteHeader(http.StatusTeapot)
		})
	}})
	on.key("someone", 60, 2)
	for _, path := range []string{"/console", "/console/api/keys"} {
		if a, _ := on.do(context.Background(), http.MethodGet, path, "", nil, nil); a.status != http.StatusTeapot {
			t.Errorf("GET %s with a console: %d %s", path, a.status, a.body)
		}
	}
	for name, h := range map[string]map[string]string{
		"foreign origin": {"Origin": "http://evil.example"},
		"cross-site":     {"Sec-Fetch-Site": "cross-site"},
	} {
		a, _ := on.do(context.Background(), http.MethodPost, "/console/api/keys", "", strings.NewReader(`{}`), h)
		if a.status != http.StatusForbidden {
			t.Errorf("%s POST to the console: %d, want 403", name, a.status)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reached) != 2 {
		t.Errorf("the console was reached at %v; want only the two same-origin requests", reached)
	}
}

// startWithConsole starts a server over a scripted service whose console
// (Config.Console) only keeps the service the server gives it, which it
// returns: the gate as the console's playground runs through it.
func startWithConsole(t *testing.T) (*testServer, execapi.Service) {
	t.Helper()
	var console execapi.Service
	ts := startServer(t, serverOptions{fake: scripted(), console: func(svc execapi.Service, _ func() Live) http.Handler {
		console = svc
		return http.NotFoundHandler()
	}})
	if console == nil {
		t.Fatal("the server built no console")
	}
	return ts, console
}

// The console's runs go through the gate under ConsoleCaller: no key's
// limits (there is none), but the usage row names the console.
func TestConsoleCallerRuns(t *testing.T) {
	ts, console := startWithConsole(t)
	ts.key("someone", 60, 2) // the server is closed: every API call needs a key
	ctx := execapi.WithCaller(context.Background(), ConsoleCaller)
	for range 3 {
		res, err := console.Exec(ctx, execapi.Request{Runtime: "bash", Code: "echo hi"}, nil)
		if err != nil || res.Stdout != "hi\n" {
			t.Fatalf("console run: %+v, %v", res, err)
		}
	}
	rows, err := ts.keys.ListUsage(context.Background(), store.UsageFilter{KeyIDs: []string{ConsoleCaller}})
	if err != nil || len(rows) != 3 || rows[0].Outcome != string(execapi.OutcomeSuccess) {
		t.Errorf("usage of the console: %+v, %v", rows, err)
	}
	// Any other caller that is no key is refused, as before.
	if _, err := ts.srv.Service().Exec(execapi.WithCaller(context.Background(), "consolE"), execapi.Request{Runtime: "bash", Code: "true"}, nil); err == nil {
		t.Error("a caller that is no key ran")
	}
}

// What spares the console's runs every key's limits is the face of the
// gate the console is given, not the caller's name: through Server.Service
// (as the MCP front end holds it) a call that names ConsoleCaller is
// refused, as any name that is no key is, and so is opening an MCP session
// under it; before, both went through without any key's limits. Over the
// API no request can name it (its caller is its key's id), so a key
// named "console" is counted against as any key is; and the console's face
// records its runs under ConsoleCaller, against no key, whatever key the
// context names.
func TestConsoleCallerNameIsNoBypass(t *testing.T) {
	ts, console := startWithConsole(t)
	k, secret := ts.key(ConsoleCaller, 1, 1)
	bg := context.Background()
	named := execapi.WithCaller(bg, ConsoleCaller)
	if _, err := ts.srv.Service().Exec(named, execapi.Request{Runtime: "bash", Code: "true"}, nil); !errors.Is(err, errUnauthorized) {
		t.Errorf("a call through the service naming the console: %v, want %v", err, errUnauthorized)
	}
	if err := ts.srv.gate.AdmitSession(named); !errors.Is(err, errUnauthorized) {
		t.Errorf("a session through the service naming the console: %v, want %v", err, errUnauthorized)
	}

	if a := ts.post(secret, `{"runtime":"bash","code":"true"}`); a.status != http.StatusOK {
		t.Fatalf("the key named console, first call: %d %s", a.status, a.body)
	}
	if a := ts.post(secret, `{"runtime":"bash","code":"true"}`); a.status != http.StatusTooManyRequests {
		t.Errorf("the key named console, over its rate of 1: %d %s", a.status, a.body)
	}

	asKey := execapi.WithCaller(bg, k.ID)
	for range 2 {
		if _, err := console.Exec(asKey, execapi.Request{Runtime: "bash", Code: "true"}, nil); err != nil {
			t.Fatalf("the console's run, its context naming a key at its rate: %v", err)
		}
	}
	if rows, err := ts.keys.ListUsage(bg, store.UsageFilter{KeyIDs: []string{ConsoleCaller}}); err != nil || len(rows) != 2 {
		t.Errorf("the console's usage: %+v, %v; want its 2 runs", rows, err)
	}
	if rows, err := ts.keys.ListUsage(bg, store.UsageFilter{KeyIDs: []string{k.ID}}); err != nil || len(rows) != 1 {
		t.Errorf("the key's usage: %+v, %v; want its 1 run over the API", rows, err)
	}
}

// A call refused before it ran is counted against its key, by reason, where
// the console reads it.
func TestRefusalsRecordedPerKey(t *testing.T) {
	ts := startServer(t, serverOptions{fake: scripted()})
	k, secret := ts.key("once", 1, 2)
	if a := ts.post(secret, `{"runtime":"bash","code":"true"}`); a.status != http.StatusOK {
		t.Fatalf("first call: %d %s", a.status, a.body)
	}
	for range 2 {
		if a := ts.post(secret, `{"runtime":"bash","code":"true"}`); a.status != http.StatusTooManyRequests {
			t.Fatalf("call over the rate: %d %s", a.status, a.body)
		}
	}
	counts, err := ts.keys.SummarizeRefusals(context.Background(), store.UsageFilter{})
	if err != nil || len(counts) != 1 || counts[0] != (store.RefusalCount{KeyID: k.ID, Reason: string(execapi.RefusedKeyRate), Count: 2}) {
		t.Errorf("refusals recorded: %+v, %v", counts, err)
	}
}

// Live reports the engine's admission (calls running and queued), the calls
// in the gate and the refusals as /metrics does.
func TestLiveFigures(t *testing.T) {
	sb, release := scriptedBackend()
	ts := startServer(t, serverOptions{capacity: 1, maxQueue: 1, queueWait: time.Minute, backend: sb})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts.post("", `{"runtime":"bash","code":"hold"}`)
		}()
	}
	waitFor(t, "one run and one queued", func() bool {
		l := ts.srv.Live()
		return l.Admission != nil && l.Admission.Running == 1 && l.Admission.Waiting == 1 && l.InGate == 2
	})
	// The queue is full: the third is refused.
	if a := ts.post("", `{"runtime":"bash","code":"true"}`); a.status != http.StatusTooManyRequests {
		t.Errorf("third call: %d", a.status)
	}
	release()
	wg.Wait()
	l := ts.srv.Live()
	if a := l.Admission; a == nil || a.Running != 0 || a.Waiting != 0 || a.Capacity != 1 || a.MaxQueue != 1 || l.InGate != 0 || l.Draining {
		t.Errorf("Live after the runs: %+v %+v", l, l.Admission)
	}
	if l.Rejections[string(execapi.RefusedQueueFull)] != 1 || float64(l.Rejections[string(execapi.RefusedQueueFull)]) != ts.metric(`scratchrun_rejections_total{reason="queue_full"}`) {
		t.Errorf("rejections %v; /metrics says %v queue_full", l.Rejections, ts.metric(`scratchrun_rejections_total{reason="queue_full"}`))
	}
}
