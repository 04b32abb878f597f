package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
)

// describing is a service whose description is the test's.
type describing struct {
	*execapitest.Service
	info execapi.Info
}

func (d describing) Describe(context.Context) (execapi.Info, error) { return d.info, nil }

// runtimesDoc is GET /v1/runtimes, decoded.
func runtimesDoc(t *testing.T, ts *testServer) execapi.Info {
	t.Helper()
	a, err := ts.do(context.Background(), http.MethodGet, "/v1/runtimes", "", nil, nil)
	if err != nil || a.status != http.StatusOK {
		t.Fatalf("GET /v1/runtimes: %v %d %s", err, a.status, a.body)
	}
	var info execapi.Info
	if err := json.Unmarshal(a.body, &info); err != nil {
		t.Fatalf("%s: %v", a.body, err)
	}
	return info
}

// /v1/runtimes says the server's version when the service names none (the
// local engine), keeps the one a service names, and shows a cluster front
// end's workers' versions beside its own.
func TestRuntimesShowTheVersion(t *testing.T) {
	ts := startServer(t, serverOptions{fake: scripted(), version: "v1.2.3"})
	if got := runtimesDoc(t, ts); got.Version != "v1.2.3" || got.WorkerVersions != nil {
		t.Errorf("engine: version %q, worker versions %q; want the server's v1.2.3 and none", got.Version, got.WorkerVersions)
	}
	front := execapi.Info{WorkerVersions: []string{"v1.2.2", "v1.2.3"}}
	ts = startServer(t, serverOptions{fake: scripted(), version: "v1.2.3",
		wrap: func(f *execapitest.Service) execapi.Service { return describing{f, front} }})
	if got := runtimesDoc(t, ts); got.Version != "v1.2.3" || !slices.Equal(got.WorkerVersions, front.WorkerVersions) {
		t.Errorf("front end: version %q, worker versions %q; want v1.2.3 and %q", got.Version, got.WorkerVersions, front.WorkerVersions)
	}
	ts = startServer(t, serverOptions{fake: scripted(), version: "v1.2.3",
		wrap: func(f *execapitest.Service) execapi.Service { return describing{f, execapi.Info{Version: "v0.9.0"}} }})
	if got := runtimesDoc(t, ts); got.Version != "v0.9.0" {
		t.Errorf("a service that names its version: %q, want v0.9.0", got.Version)
	}
}
