package engine

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/images"
	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces"
	"github.com/scratchrun/scratchrun/internal/testenv"
	"github.com/scratchrun/scratchrun/internal/testenv/levels"
)

// These tests run real sandboxes on real images: they need root (or user
// namespaces) and `scratchrun images build` to have run. Missing images fail
// the tests rather than skip them: a suite that silently tests nothing is worse
// than a red one. The environment (directories of the binary's own per
// isolation level, the image store, shared backends, the final leak check)
// is package testenv's; the tests of logic alone run on the fake backend of
// package sandboxtest instead.

var (
	env = testenv.New("engine")
	// allLevels is the tests' table of isolation levels (levels.Table).
	allLevels = levels.All(env)
	nsLevel   = allLevels[0]
	// budgetLevel is the namespaces level again, under a cgroup parent of
	// its own: the test that gives the parent a small memory budget must
	// not shrink the one every other test's sandboxes live under.
	budgetLevel = env.Level("namespaces-budget", levels.Namespaces)

	testStateDir     = nsLevel.StateDir
	testCgroupParent = nsLevel.CgroupParent
	leakOpts         = nsLevel.Leak

	testStore *images.Store
	// testBackend is the namespaces level's shared backend, and testNS the
	// backend itself.
	testBackend *testenv.Shared
	testNS      *namespaces.Backend
)

func TestMain(m *testing.M) { env.Main(m) }

// newTestEngine returns an engine over the real image store and backend.
func newTestEngine(t testing.TB, mutate func(*Config)) *Engine {
	t.Helper()
	if testStore == nil {
		testStore = env.Store(t)
		testBackend = nsLevel.Backend(t)
		testNS = nsLevel.Real().(*namespaces.Backend)
	}
	return newEngineOn(t, testBackend, mutate)
}

// newEngineOn returns an engine over the real image store and backend, its
// configuration the default one changed by mutate (when set).
func newEngineOn(t testing.TB, backend *testenv.Shared, mutate func(*Config)) *Engine {
	t.Helper()
	cfg := DefaultConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	e, err := New(cfg, testStore, backend)
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

// levelsByEngine records which isolation level each engine of
// forEachBackend runs on.
var levelsByEngine sync.Map // *Engine -> *testenv.Level

// gvisorStateDir is the gVisor level's state directory.
var gvisorStateDir = levelNamed("gvisor").StateDir

func levelNamed(name string) *testenv.Level {
	for _, l := range allLevels {
		if l.Name == name {
			return l
		}
	}
	panic("no isolation level " + name)
}

// forEachBackend runs test once per isolation level that runs it, each with an engine
// over that level's shared backend (mutate adjusts the engine's
// configuration), and once more on the namespaces level with zygotes on.
func forEachBackend(t *testing.T, mutate func(*Config), test func(t *testing.T, e *Engine)) {
	for _, level := range allLevels {
		if !levels.Runs(level.Name, t.Name()) {
			continue // a level that runs only some cases (levels.Table)
		}
		t.Run(level.Name, func(t *testing.T) {
			newTestEngine(t, nil) // the store, and the default level first
			e := newEngineOn(t, level.Backend(t), mutate)
			levelsByEngine.Store(e, level)
			test(t, e)
		})
	}
	// The namespaces level again with zygotes on (Config.Zygote): a Python
	// call's sandbox is then forked from its caller's zygote of the call's
	// variant (light, or heavy with numpy, pandas and pyplot preloaded), and
	// every case must hold for those sandboxes as it does for the others.
	t.Run("namespaces-zygote", func(t *testing.T) {
		newTestEngine(t, nil)
		e := newEngineOn(t, testBackend, func(c *Config) {
			if mutate != nil {
				mutate(c)
			}
			c.Zygote = true
		})
		levelsByEngine.Store(e, nsLevel)
		test(t, e)
	})
}

// levelOf is the isolation level e runs on.
func levelOf(e *Engine) *testenv.Level {
	if l, ok := levelsByEngine.Load(e); ok {
		return l.(*testenv.Level)
	}
	return nsLevel
}

// leakOptsFor is where e's sandboxes live, for leak checks.
func leakOptsFor(e *Engine) leakcheck.Options { return levelOf(e).Leak }

// isGVisor reports whether e runs on gVisor (for the few expectations that
// differ: gVisor's own syscall costs, mount sources).
func isGVisor(e *Engine) bool { return levelOf(e).Name == "gvisor" }
