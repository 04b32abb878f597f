package engine

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/netpolicy"
	"github.com/scratchrun/scratchrun/internal/testenv/networld"
	"github.com/scratchrun/scratchrun/internal/testenv/pkgindex"
)

// A package installed with pip in one call of an egress session is there
// for the next: the session's writable layer lives on. The index is the
// loopback one, on the outside of a network world of the test's own.
func TestSessionKeepsPipInstall(t *testing.T) {
	if !networld.Isolate(t) {
		return
	}
	w := networld.Build(t)
	addr := networld.Internet.String() + ":8080"
	index := &pkgindex.Index{URL: "http://" + addr, Wheels: map[string][]byte{
		"scratchrun-hello": pkgindex.Wheel(t, "scratchrun-hello", map[string][]byte{
			"scratchrun_hello/__init__.py": []byte("GREETING = 'hello from the index'\n"),
		}),
	}}
	l, _ := networld.ListenIn(t, w.Outside, "tcp", addr)
	srv := &http.Server{Handler: index}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	ncfg := netpolicy.DefaultConfig()
	ncfg.DNS = []netip.Addr{networld.Resolver}
	mgr, err := netpolicy.New(ncfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The engine's Close closes mgr.
	e := newSessionTestEngine(t, func(c *Config) {
		c.Policy.AllowEgress = true
		c.Network = mgr
	})
	requireRuntime(t, "bash")
	c, err := e.SessionPolicy().ValidateSession(e.Policy(), execapi.SessionRequest{Runtime: "bash", Network: execapi.NetworkEgress,
		Limits: execapi.Limits{MemoryMB: 512, TimeoutMS: 30000}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := e.OpenSession(as("k"), c)
	if err != nil {
		t.Fatal(err)
	}
	res := mustExec(t, e, info.ID, "python3.13 -m pip install --quiet --break-system-packages --index-url "+index.URL+"/simple/ --trusted-host "+networld.Internet.String()+" scratchrun-hello 2>&1; echo rc=$?")
	if !strings.HasSuffix(res.Stdout, "rc=0\n") {
		t.Fatalf("pip install: %q (%s)", res.Stdout, res.Note)
	}
	res = mustExec(t, e, info.ID, `python3.13 -c 'import scratchrun_hello; print(scratchrun_hello.GREETING)'`)
	if res.Stdout != "hello from the index\n" {
		t.Fatalf("the next call's import: %q %q (%s)", res.Stdout, res.Stderr, res.Note)
	}
}
