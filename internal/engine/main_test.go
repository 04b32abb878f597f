package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/images"
	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/gvisor"
	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces"
)

// These tests run real sandboxes on real images: they need root (or user
// namespaces) and `scratchrun images build` to have run. Missing images fail
// the tests rather than skip them: a suite that silently tests nothing is worse
// than a red one.

var (
	// Each test binary has its own state directory and cgroup parent, so
	// that its leak checks never see another test run's sandboxes.
	testStateDir     = fmt.Sprintf("/run/scratchrun-test-%d", os.Getpid())
	testCgroupParent = fmt.Sprintf("scratchrun-test-%d", os.Getpid())

	testStore   *images.Store
	testBackend *countingBackend
	testNS      *namespaces.Backend
	leakOpts    = leakcheck.Options{CgroupParent: testCgroupParent, MountMarkers: []string{testStateDir, "/var/lib/scratchrun"}}
	suiteBefore leakcheck.Snapshot
)

func TestMain(m *testing.M) {
	gvisor.RunInitIfRequested()
	suiteBefore = leakcheck.Take(leakOpts)
	gvisorBefore = leakcheck.Take(gvisorLeakOpts)
	code := m.Run()
	if testNS != nil {
		if err := testNS.Close(); err != nil {
			os.Stderr.WriteString("close backend: " + err.Error() + "\n")
			code = 1
		}
	}
	os.RemoveAll(testStateDir)
	if gv := gvisorCase.backend; gv != nil {
		if err := gv.(*countingBackend).Backend.(interface{ Close() error }).Close(); err != nil {
			os.Stderr.WriteString("close gvisor backend: " + err.Error() + "\n")
			code = 1
		}
		os.RemoveAll(gvisorStateDir)
		if code == 0 {
			if left := leakcheck.WaitClean(gvisorBefore, gvisorLeakOpts, 10*time.Second); len(left) > 0 {
				os.Stderr.WriteString("leak check after the gVisor runs failed:\n  " + strings.Join(left, "\n  ") + "\n")
				code = 1
			}
		}
	}
	if code == 0 {
		if left := leakcheck.WaitClean(suiteBefore, leakOpts, 5*time.Second); len(left) > 0 {
			os.Stderr.WriteString("leak check after the whole engine suite failed:\n  " + strings.Join(left, "\n  ") + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// countingBackend wraps the real backend to count sandboxes created, so tests
// can prove that bad input never reaches one.
type countingBackend struct {
	sandbox.Backend
	created atomic.Int64
}

func (c *countingBackend) Create(ctx context.Context, cfg sandbox.Config) (sandbox.Sandbox, error) {
	c.created.Add(1)
	return c.Backend.Create(ctx, cfg)
}

func dataDir() string {
	if d := os.Getenv("SCRATCHRUN_DATA_DIR"); d != "" {
		return d
	}
	return "/var/lib/scratchrun"
}

// newTestEngine returns an engine over the real image store and backend.
func newTestEngine(t testing.TB, mutate func(*Config)) *Engine {
	t.Helper()
	if testStore == nil {
		st, err := images.OpenStore(images.Options{Root: dataDir(), UIDBase: 1_000_000_000})
		if err != nil {
			t.Fatalf("open image store: %v", err)
		}
		if len(st.Installed()) == 0 {
			t.Fatalf("no runtime images in %s: run `scratchrun images build` first", dataDir())
		}
		testStore = st
		b, err := namespaces.New(namespaces.Options{StateDir: testStateDir, CgroupParent: testCgroupParent})
		if err != nil {
			t.Fatalf("namespaces backend: %v", err)
		}
		testNS = b
		testBackend = &countingBackend{Backend: b}
	}
	cfg := DefaultConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	e, err := New(cfg, testStore, testBackend)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// run executes req and fails the test on an error (not on a non-zero exit).
func run(t testing.TB, e *Engine, req execapi.Request) execapi.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := e.Exec(ctx, req, nil)
	if err != nil {
		t.Fatalf("exec %s: %v", req.Runtime, err)
	}
	if !res.StatePurged {
		t.Errorf("state_purged is false: %s", res.Note)
	}
	return res
}

// requireRuntime fails when the runtime's image is missing.
func requireRuntime(t *testing.T, name string) {
	t.Helper()
	if _, err := testStore.Resolve(name); err != nil {
		t.Fatalf("%v", err)
	}
}

// hostSecretFile creates a file on the host that no sandbox may ever read.
func hostSecretFile(t *testing.T) (path, secret string) {
	t.Helper()
	secret = "host-secret-" + filepath.Base(t.TempDir())
	path = filepath.Join(os.TempDir(), secret)
	if err := os.WriteFile(path, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(path) })
	return path, secret
}

// The contract tests run over every isolation level: a table of backends,
// each built once per test binary with its own state directory and cgroup
// parent (so each leak check sees only its own sandboxes).
var (
	gvisorStateDir   = fmt.Sprintf("/run/scratchrun-test-%d-gvisor", os.Getpid())
	gvisorCgroup     = fmt.Sprintf("scratchrun-test-%d-gvisor", os.Getpid())
	gvisorLeakOpts   = leakcheck.Options{CgroupParent: gvisorCgroup, MountMarkers: []string{gvisorStateDir}}
	gvisorBefore     leakcheck.Snapshot
	gvisorCase       = &backendCase{name: "gvisor"}
	namespacesCase   = &backendCase{name: "namespaces"}
	backendsByEngine sync.Map // *Engine -> *backendCase
)

type backendCase struct {
	name    string
	once    sync.Once
	backend sandbox.Backend
	err     error
}

func (b *backendCase) open(t testing.TB) sandbox.Backend {
	t.Helper()
	b.once.Do(func() {
		switch b.name {
		case "namespaces":
			newTestEngine(t, nil)
			b.backend = testBackend
		case "gvisor":
			gv, err := gvisor.New(gvisor.Options{StateDir: gvisorStateDir, CgroupParent: gvisorCgroup})
			if err != nil {
				b.err = err
				return
			}
			b.backend = &countingBackend{Backend: gv}
		}
	})
	if b.err != nil {
		t.Fatalf("%s backend: %v", b.name, b.err)
	}
	return b.backend
}

// forEachBackend runs test once per isolation level, each with an engine
// over that backend (mutate adjusts the engine's configuration).
func forEachBackend(t *testing.T, mutate func(*Config), test func(t *testing.T, e *Engine)) {
	for _, bc := range []*backendCase{namespacesCase, gvisorCase} {
		t.Run(bc.name, func(t *testing.T) {
			backend := bc.open(t)
			cfg := DefaultConfig()
			if mutate != nil {
				mutate(&cfg)
			}
			e, err := New(cfg, testStore, backend)
			if err != nil {
				t.Fatal(err)
			}
			backendsByEngine.Store(e, bc)
			test(t, e)
		})
	}
}

// leakOptsFor is where e's sandboxes live, for leak checks.
func leakOptsFor(e *Engine) leakcheck.Options {
	if bc, ok := backendsByEngine.Load(e); ok && bc.(*backendCase).name == "gvisor" {
		return gvisorLeakOpts
	}
	return leakOpts
}

// countingOf is e's counting backend.
func countingOf(e *Engine) *countingBackend { return e.Backend().(*countingBackend) }

// isGVisor reports whether e runs on gVisor (for the few expectations that
// differ: gVisor's own syscall costs, mount sources).
func isGVisor(e *Engine) bool {
	bc, ok := backendsByEngine.Load(e)
	return ok && bc.(*backendCase).name == "gvisor"
}
