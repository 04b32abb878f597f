package cluster_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
	"github.com/scratchrun/scratchrun/internal/httpapi"
	"github.com/scratchrun/scratchrun/internal/store"
	"github.com/scratchrun/scratchrun/internal/testenv"
	"github.com/scratchrun/scratchrun/internal/testenv/natsserver"
)

// A request the worker's policy finds invalid (the front end's let it
// through) reaches the HTTP caller as the 400 a server over a local
// engine with that policy gives: the same code, field and words, since
// the worker's execapi.ValidationError travels as it is.
func TestWorkerValidationReadsAsTheLocalEngines(t *testing.T) {
	strict := execapi.DefaultPolicy()
	strict.DefaultTimeout, strict.MaxTimeout = 5*time.Second, 5*time.Second
	strict.DefaultMemoryMB, strict.MaxMemoryMB = 128, 128
	local := execapitest.NewWithPolicy(strict, "bash")
	localURL := serveHTTP(t, local, strict)

	ns := natsserver.Start(t, natsserver.Options{})
	eng := &engine{Service: execapitest.NewWithPolicy(strict, "bash")}
	eng.free.Store(8)
	startWorker(t, ns.URLs(), "w-strict", eng, nil)
	f := startFrontend(t, ns.URLs(), nil)
	waitWorkers(t, f, "w-strict")
	clusterURL := serveHTTP(t, f, f.Policy())

	bodies := []string{
		`{"runtime":"bash","code":"x","limits":{"timeout_ms":20000,"memory_mb":128}}`,
		`{"runtime":"bash","code":"x","limits":{"timeout_ms":2000,"memory_mb":256}}`,
	}
	for _, body := range bodies {
		// The front end's own policy lets it through: the worker refuses.
		var req execapi.Request
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Policy().Validate(req); err != nil {
			t.Fatalf("the front end's policy refuses %s: %v", body, err)
		}
		want, got := postExec(t, localURL, body), postExec(t, clusterURL, body)
		if want.status != http.StatusBadRequest || want.Error.Field == "" {
			t.Fatalf("the local engine's answer to %s: %d %+v; the test expects a 400 naming a field", body, want.status, want.Error)
		}
		if got != want {
			t.Errorf("%s: over the cluster %d %+v, over a local engine %d %+v", body, got.status, got.Error, want.status, want.Error)
		}
	}
	if n := len(eng.Ran()) + len(local.Ran()); n != 0 {
		t.Errorf("%d invalid calls ran", n)
	}
}

// serveHTTP runs an API server over svc on loopback, without keys.
func serveHTTP(t *testing.T, svc execapi.Service, p execapi.Policy) string {
	t.Helper()
	keys, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "keys.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keys.Close() })
	srv, err := httpapi.New(httpapi.Config{Service: svc, Policy: p, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	return testenv.ServeLoopback(t, srv.Serve)
}

// answer is an HTTP error answer: its status and error document.
type answer struct {
	status int
	Error  struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
	} `json:"error"`
}

// postExec posts body to url's /v1/exec.
func postExec(t *testing.T, url, body string) answer {
	t.Helper()
	resp, err := http.Post(url+"/v1/exec", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode}
	if err := json.Unmarshal(data, &a); err != nil {
		t.Fatalf("answer %d %s: %v", resp.StatusCode, data, err)
	}
	return a
}
