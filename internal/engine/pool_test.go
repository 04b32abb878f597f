package engine

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/images"
	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// runRecorder wraps the real backend and counts Run calls per sandbox, so a
// test can prove no pooled sandbox is ever handed out twice.
type runRecorder struct {
	sandbox.Backend
	mu   sync.Mutex
	runs map[string]int
}

type recordedSandbox struct {
	sandbox.Sandbox
	r *runRecorder
}

// Unwrap is the backend recorded: its optional interfaces (a memory
// gauge) stay the engine's to find.
func (r *runRecorder) Unwrap() sandbox.Backend { return r.Backend }

// Unwrap is the sandbox recorded (its CPU meter, say).
func (s *recordedSandbox) Unwrap() sandbox.Sandbox { return s.Sandbox }

func (r *runRecorder) Create(ctx context.Context, cfg sandbox.Config) (sandbox.Sandbox, error) {
	sb, err := r.Backend.Create(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &recordedSandbox{Sandbox: sb, r: r}, nil
}

func (s *recordedSandbox) Run(ctx context.Context, job sandbox.Job) (sandbox.Outcome, error) {
	s.r.mu.Lock()
	s.r.runs[s.ID()]++
	s.r.mu.Unlock()
	return s.Sandbox.Run(ctx, job)
}

func newPooledEngine(t *testing.T, pc PoolConfig) (*Engine, *runRecorder) {
	t.Helper()
	return newPooledEngineWith(t, pc, nil)
}

// newPooledEngineWith is newPooledEngine with a change to the configuration.
func newPooledEngineWith(t *testing.T, pc PoolConfig, mutate func(*Config)) (*Engine, *runRecorder) {
	t.Helper()
	newTestEngine(t, nil) // opens the store and backend
	rec := &runRecorder{Backend: testBackend, runs: map[string]int{}}
	cfg := DefaultConfig()
	cfg.Pool = pc
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if mutate != nil {
		mutate(&cfg)
	}
	e, err := New(cfg, testStore, rec)
	if err != nil {
		t.Fatal(err)
	}
	return e, rec
}

func waitReady(t *testing.T, e *Engine, key execapi.PoolKey, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for e.PoolStats()[key] < n {
		if time.Now().After(deadline) {
			t.Fatalf("pool never reached %d ready for %s: %v", n, key, e.PoolStats())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Warm Python sandboxes come with numpy imported, and every call still gets
// a fresh, unshared interpreter: its own hash seed and random state, and no
// trace of the previous call.
func TestWarmPythonIsFreshEveryCall(t *testing.T) {
	newTestEngine(t, nil) // the test binary's cgroup parent exists before the snapshot
	before := leakcheck.Take(leakOpts)
	e, _ := newPooledEngine(t, PoolConfig{Floor: 1, Max: 1, Runtimes: []string{"python3.13"}, Networks: []string{"none"}, IdleAfter: time.Minute})
	code := `import os, random, sys
warm = 'numpy' in sys.modules
import numpy
seen = os.path.exists('/tmp/marker')
open('/tmp/marker', 'w').write('x')
print(warm, seen, hash('scratchrun'), random.random(), numpy.random.random(), os.environ.get('K'), os.getcwd(), sys.argv[0], __name__)
`
	var lines []string
	for i := 0; i < 3; i++ {
		waitReady(t, e, execapi.PoolKey{Runtime: "python3.13", Network: "none", Variant: "heavy"}, 1)
		res := run(t, e, execapi.Request{Runtime: "python3.13", Code: code, Env: map[string]string{"K": fmt.Sprint(i)}})
		if res.ExitCode != 0 {
			t.Fatalf("exit %d stderr %q", res.ExitCode, res.Stderr)
		}
		lines = append(lines, strings.TrimSpace(res.Stdout))
	}
	seen := map[string]bool{}
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) != 9 || f[0] != "True" || f[1] != "False" || f[5] != fmt.Sprint(i) || f[6] != "/tmp" || f[7] != "/code/main.py" || f[8] != "__main__" {
			t.Errorf("call %d: %q; want warm, fresh /tmp, its own env, cwd /tmp, argv[0] /code/main.py, __main__", i, l)
		}
		for _, v := range f[2:5] {
			if seen[v] {
				t.Errorf("value %s repeated across calls: hash seed or random state is shared", v)
			}
			seen[v] = true
		}
	}
	e.Close()
	if left := leakcheck.WaitClean(before, leakOpts, 5*time.Second); len(left) > 0 {
		t.Errorf("left after pool shutdown: %v", left)
	}
}

// A traceback from a warm interpreter looks like a cold one's.
func TestWarmTracebackStartsAtUserCode(t *testing.T) {
	e, _ := newPooledEngine(t, PoolConfig{Floor: 1, Max: 1, Runtimes: []string{"python3.13"}, Networks: []string{"none"}, IdleAfter: time.Minute})
	defer e.Close()
	waitReady(t, e, execapi.PoolKey{Runtime: "python3.13", Network: "none", Variant: "heavy"}, 1)
	res := run(t, e, execapi.Request{Runtime: "python3.13", Code: "def f():\n    1/0\nf()\n"})
	if res.ExitCode != 1 || !strings.Contains(res.Stderr, `File "/code/main.py", line 2, in f`) || strings.Contains(res.Stderr, "runpy") {
		t.Errorf("exit %d stderr %q", res.ExitCode, res.Stderr)
	}
}

// Node warm start runs the file as `node FILE` would.
func TestWarmNode(t *testing.T) {
	e, _ := newPooledEngine(t, PoolConfig{Floor: 1, Max: 1, Runtimes: []string{"node20"}, Networks: []string{"none"}, IdleAfter: time.Minute})
	defer e.Close()
	waitReady(t, e, execapi.PoolKey{Runtime: "node20", Network: "none", Variant: "light"}, 1)
	res := run(t, e, execapi.Request{Runtime: "node20", Env: map[string]string{"K": "v"},
		Code: "console.log(process.argv[1], process.cwd(), process.env.K, require.main === module, typeof require('fs').readFileSync)"})
	if res.ExitCode != 0 || res.Stdout != "/code/main.js /tmp v true function\n" {
		t.Errorf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}

// A job whose memory limit is below what a warm sandbox already uses runs in
// a fresh cold sandbox instead, and still works.
func TestWarmFallsBackBelowUsage(t *testing.T) {
	// 20 MB is below the contract's minimum but well below what a heavy
	// warm sandbox uses, which is the point; this engine allows it.
	e, _ := newPooledEngineWith(t, PoolConfig{Floor: 1, Max: 1, Runtimes: []string{"python3.13"}, Networks: []string{"none"}, IdleAfter: time.Minute},
		func(c *Config) { c.Policy.MinMemoryMB = 16 })
	defer e.Close()
	waitReady(t, e, execapi.PoolKey{Runtime: "python3.13", Network: "none", Variant: "heavy"}, 1)
	time.Sleep(1500 * time.Millisecond) // let the heavy imports finish
	res := run(t, e, execapi.Request{Runtime: "python3.13", Limits: execapi.Limits{MemoryMB: 20}, Code: "import sys\nprint('numpy' in sys.modules)"})
	if res.ExitCode != 0 || res.Stdout != "False\n" {
		t.Errorf("exit %d stdout %q stderr %q note %q", res.ExitCode, res.Stdout, res.Stderr, res.Note)
	}
}

func TestWarmVariant(t *testing.T) {
	py := images.Runtime{Warm: "python", Preload: []string{"numpy", "pandas", "matplotlib.pyplot"}}
	cases := map[string]string{
		"print(1)":                          variantLight,
		"import numpy as np":                variantHeavy,
		"  from matplotlib import pyplot":   variantHeavy,
		"import os, pandas":                 variantHeavy,
		"import matplotlib.pyplot as plt":   variantHeavy,
		"# import numpy\nprint('numpy')":    variantLight,
		"import numpyish":                   variantLight,
		"from os import path as numpy_path": variantLight,
	}
	for code, want := range cases {
		if got := warmVariant(py, code); got != want {
			t.Errorf("%q: %q, want %q", code, got, want)
		}
	}
	if got := warmVariant(images.Runtime{}, "import numpy"); got != "" {
		t.Errorf("runtime without warm start: %q", got)
	}
}

// A warm Python interpreter, light or heavy, runs a program exactly as a
// cold `python3 FILE` does: same module globals, argv, tracebacks, syntax
// errors, exit codes and messages, pickling from __main__, source lookup,
// environment, and the same end: atexit callbacks, non-daemon threads,
// __del__ of globals and files left open (the heavy variant, and a light
// sandbox forked from a zygote, exit without tearing modules down).
func TestWarmPythonMatchesCold(t *testing.T) {
	probes := map[string]string{
		"globals": "import sys\nprint(sorted(k for k in globals() if k != 'numpy'), __name__, __file__, __spec__, __cached__, type(__loader__).__name__)\n" +
			"print(sys.argv, sys.orig_argv[1:], sys.path[0], __builtins__ is __import__('builtins'))",
		"traceback":         "def f():\n    1/0\nf()\n",
		"syntax":            "print(\n",
		"exit":              "import sys\nprint('bye')\nsys.exit(3)",
		"exit-message":      "import sys\nsys.exit('oops')",
		"exit-none":         "raise SystemExit",
		"exit-big":          "import sys\nsys.exit(256 + 7)",
		"pickle":            "import pickle\nclass A: pass\nprint(type(pickle.loads(pickle.dumps(A()))).__module__)",
		"source":            "import inspect\ndef g():\n    return 1\nprint(inspect.getsource(g), end='')",
		"environ":           "import os\nprint(os.environ['K'], os.environ['U'], os.getcwd(), 'SCRATCHRUN_PRELOAD' in os.environ)",
		"main-guard":        "if __name__ == '__main__':\n    print('main')",
		"stdin":             "import sys\nprint(repr(sys.stdin.read()))",
		"atexit":            "import atexit\natexit.register(print, 'at exit')\nprint('body')",
		"atexit-error":      "import atexit\natexit.register(print, 'cleanup')\nraise ValueError('x')",
		"thread":            "import threading, time\nthreading.Thread(target=lambda: (time.sleep(0.2), print('late'))).start()\nprint('main done')",
		"del":               "class A:\n    def __del__(self):\n        print('deleted')\na = A()\nprint('body')",
		"no-newline":        "import sys\nsys.stdout.write('no newline')",
		"unclosed":          "f = open('/tmp/out.txt', 'w')\nf.write('written but never closed')\nprint('body')",
		"unclosed-raise":    "def f():\n    out = open('/tmp/out.txt', 'w')\n    out.write('partial')\n    raise ValueError('x')\nf()",
		"unclosed-builtins": "import builtins\nbuiltins.kept = open('/tmp/out.txt', 'w')\nbuiltins.kept.write('kept in builtins')",
		"exit-huge":         "import sys\nsys.exit(2 ** 70)",
		"c-stdio":           "import ctypes\nctypes.CDLL(None).printf(b'from C stdio\\n')\nprint('python', flush=True)",
		"excepthook":        "import sys\nsys.excepthook = lambda t, v, tb: print('hook', t.__name__)\nraise KeyError(1)",
	}
	env := map[string]string{"K": "a=b", "U": "ü ∑"}
	cold := newTestEngine(t, nil)
	defer cold.Close()
	pc := PoolConfig{Floor: 1, Max: 1, Runtimes: []string{"python3.13"}, Networks: []string{"none"}, IdleAfter: time.Minute}
	warm, _ := newPooledEngine(t, pc)
	defer warm.Close()
	zygotes, _ := newPooledEngineWith(t, pc, func(c *Config) { c.Zygote = true })
	defer zygotes.Close()
	zygoteVariants := map[string]string{"zygote": variantLight, "zygote-heavy": variantHeavy}
	for _, variant := range []string{variantLight, variantHeavy, "zygote", "zygote-heavy"} {
		for name, code := range probes {
			if variant == variantHeavy || variant == "zygote-heavy" {
				code = "import numpy\n" + code
			}
			req := execapi.Request{Runtime: "python3.13", Code: code, Env: env, ReturnFiles: []string{"/tmp/out.txt"}}
			want := run(t, cold, req)
			var got execapi.Result
			if zv, ok := zygoteVariants[variant]; ok {
				// A sandbox forked from the zygote when the call before
				// ended: the first light call's is made on its path, the
				// first heavy call runs in the pool's heavy sandbox
				// while its zygote starts.
				key := execapi.PoolKey{Runtime: "python3.13", Network: "none", Variant: zv}
				got = run(t, zygotes, req)
				waitFor(t, "the next sandbox", func() bool { return zygotes.next.count(key) == 1 })
			} else {
				waitReady(t, warm, execapi.PoolKey{Runtime: "python3.13", Network: "none", Variant: variant}, 1)
				got = run(t, warm, req)
			}
			if got.ExitCode != want.ExitCode || got.Stdout != want.Stdout || got.Stderr != want.Stderr || got.Files["/tmp/out.txt"] != want.Files["/tmp/out.txt"] {
				t.Errorf("%s/%s: warm exit %d stdout %q stderr %q files %v\ncold exit %d stdout %q stderr %q files %v", variant, name,
					got.ExitCode, got.Stdout, got.Stderr, got.Files, want.ExitCode, want.Stdout, want.Stderr, want.Files)
			}
		}
	}
}
