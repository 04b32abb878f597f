package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/leakcheck"
)

// freshStateCase is one runtime's pair of programs: seen prints the values
// that must differ between calls (one per line); plant changes the
// interpreter's modules and process state, and check prints "pristine" when
// none of it is there.
type freshStateCase struct {
	name, runtime string
	variant       string // the warm variant its programs use
	seen          string
	plant, check  string
}

var freshStateCases = []freshStateCase{
	{
		name: "python light", runtime: "python3.13", variant: variantLight,
		seen:  "import random, uuid, secrets, os\nprint(random.random())\nprint(uuid.uuid4())\nprint(secrets.token_hex(16))\nprint(os.urandom(16).hex())\n",
		plant: "import json, sys, builtins, os\njson.dumps = lambda *a, **k: 'patched'\nsys.modules['planted_by_a_call'] = sys\nbuiltins.planted = 1\nos.environ['PLANTED'] = '1'\nsys.path.insert(0, '/planted')\nprint('planted')\n",
		check: "import json, sys, builtins, os\nok = json.dumps({}) == '{}' and 'planted_by_a_call' not in sys.modules and not hasattr(builtins, 'planted') and 'PLANTED' not in os.environ and '/planted' not in sys.path\nprint('pristine' if ok else 'dirty')\n",
	},
	{
		// The heavy variant (numpy imported before the call, in a warm
		// sandbox or a zygote): numpy's global generator, seeded when
		// numpy is imported, must differ too.
		name: "python heavy", runtime: "python3.13", variant: variantHeavy,
		seen:  "import numpy, random, uuid, secrets\nprint(numpy.random.random())\nprint(random.random())\nprint(uuid.uuid4())\nprint(secrets.token_hex(16))\n",
		plant: "import numpy, sys\nnumpy.pi = 3\nnumpy.random.seed(7)\nsys.modules['planted_by_a_call'] = numpy\nprint('planted')\n",
		check: "import numpy, sys\nok = numpy.pi != 3 and 'planted_by_a_call' not in sys.modules and numpy.random.random() != numpy.random.RandomState(7).random_sample()\nprint('pristine' if ok else 'dirty')\n",
	},
	{
		name: "node", runtime: "node20", variant: variantLight,
		seen:  "const c = require('crypto');\nconsole.log(c.randomUUID());\nconsole.log(Math.random());\nconsole.log(c.randomBytes(16).toString('hex'));\n",
		plant: "JSON.stringify = () => 'patched';\nglobalThis.planted = 1;\nrequire('fs').planted = 1;\nprocess.env.PLANTED = '1';\nconsole.log('planted');\n",
		check: "const ok = JSON.stringify({}) === '{}' && globalThis.planted === undefined && require('fs').planted === undefined && process.env.PLANTED === undefined;\nconsole.log(ok ? 'pristine' : 'dirty');\n",
	},
}

// Calls in a row never share random state, and nothing one call does to the
// interpreter (a module monkeypatched, one planted in sys.modules, a global,
// the environment, sys.path) is there in the next: every call's interpreter
// is its own, however it was made (started cold, or pre-started in a warm
// sandbox). Every other call waits for a warm sandbox of its variant and the
// others go back to back, so both paths run; the pool's warm sandboxes are
// where an interpreter made ahead of the call (a zygote's fork, one day)
// would come in.
func TestCallsShareNoRandomStateAndSeeNothingOfEachOther(t *testing.T) {
	callsShareNothing(t, false)
}

// The same with zygotes on (Config.Zygote): the Python calls' sandboxes
// are made from the caller's zygote of their variant (every call of one
// caller sees its hash seed and a frozen heap, so it is the zygote that
// made them; a caller's first heavy call runs in the pool's sandbox while
// its heavy zygote starts), Node's come from the pool as before; and
// nothing is left once the engine closed, its retired zygotes included.
func TestCallsShareNoRandomStateAndSeeNothingOfEachOtherWithZygotes(t *testing.T) {
	callsShareNothing(t, true)
}

func callsShareNothing(t *testing.T, zygotes bool) {
	newTestEngine(t, nil) // the test binary's cgroup parent exists before the snapshot
	before := leakcheck.Take(leakOpts)
	e, _ := newPooledEngineWith(t, PoolConfig{Floor: 1, Max: 1, Runtimes: []string{"python3.13", "node20"}, Networks: []string{"none"}, IdleAfter: time.Minute},
		func(c *Config) { c.Zygote = zygotes })
	for _, c := range freshStateCases {
		t.Run(c.name, func(t *testing.T) {
			requireRuntime(t, c.runtime)
			key := execapi.PoolKey{Runtime: c.runtime, Network: "none", Variant: c.variant}
			fromZygote := zygotes && strings.HasPrefix(c.runtime, "python")
			call := func(i int, code string) execapi.Result {
				if i%2 == 0 && !fromZygote {
					waitReady(t, e, key, 1)
				}
				return run(t, e, execapi.Request{Runtime: c.runtime, Code: code})
			}
			if fromZygote {
				seed := "import gc, sys\nprint(hash('scratchrun'), sys.flags.hash_randomization, gc.get_freeze_count() > 0)\n"
				if c.variant == variantHeavy {
					seed = "import numpy\n" + seed
				}
				call(0, seed) // a heavy one runs in the pool's sandbox
				if a, b := call(1, seed), call(2, seed); a.Stdout != b.Stdout || a.ExitCode != 0 || !strings.HasSuffix(a.Stdout, " 1 True\n") {
					t.Fatalf("two calls printed %q and %q (stderr %q): not made from one zygote", a.Stdout, b.Stdout, a.Stderr)
				}
			}
			seen := map[string]int{}
			for i := range 4 {
				res := call(i, c.seen)
				if res.ExitCode != 0 {
					t.Fatalf("call %d: exit %d, stderr %q, note %q", i, res.ExitCode, res.Stderr, res.Note)
				}
				lines := strings.Fields(res.Stdout)
				if len(lines) < 3 {
					t.Fatalf("call %d: stdout %q, want a value per line", i, res.Stdout)
				}
				for j, v := range lines {
					if prev, ok := seen[v]; ok {
						t.Errorf("call %d printed %q as value %d, as call %d did: random state shared", i, v, j, prev)
					}
					seen[v] = i
				}
			}
			for i := range 4 {
				if res := call(i, c.plant); res.ExitCode != 0 || res.Stdout != "planted\n" {
					t.Fatalf("plant %d: exit %d, stdout %q, stderr %q", i, res.ExitCode, res.Stdout, res.Stderr)
				}
				res := call(i, c.check)
				if res.ExitCode != 0 || res.Stdout != "pristine\n" {
					t.Errorf("the call after planting call %d: exit %d, stdout %q, stderr %q", i, res.ExitCode, res.Stdout, res.Stderr)
				}
			}
		})
	}
	e.Close()
	if left := leakcheck.WaitClean(before, leakOpts, 5*time.Second); len(left) > 0 {
		t.Errorf("left after the calls and the pool's shutdown: %v", left)
	}
}

// Two callers never get sandboxes from one zygote: each caller's calls
// share their zygote's hash seed, and the two callers' seeds differ (a
// zygote's is drawn when it starts). Each caller's later calls run in the
// next sandbox made for it when its call before ended (nextSandboxes), so
// those are its own zygote's too.
func TestZygotesServeOneCallerEach(t *testing.T) {
	newTestEngine(t, nil)
	requireRuntime(t, "python3.13")
	before := leakcheck.Take(leakOpts)
	e, _ := newPooledEngineWith(t, PoolConfig{Floor: 1, Runtimes: []string{"python3.13"}, Networks: []string{"none"}, Variants: []string{variantLight}},
		func(c *Config) { c.Zygote = true })
	seed := func(caller string) string {
		ctx, cancel := context.WithTimeout(execapi.WithCaller(context.Background(), caller), 2*time.Minute)
		defer cancel()
		res, err := e.Exec(ctx, execapi.Request{Runtime: "python3.13", Code: "print(hash('scratchrun'))"}, nil)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %v %+v", caller, err, res)
		}
		return res.Stdout
	}
	alice, bob := seed("alice"), seed("bob")
	waitFor(t, "alice's and bob's next sandboxes", func() bool { return e.next.count() == 2 })
	if again := seed("alice"); again != alice {
		t.Errorf("alice's calls printed %q and %q: not one zygote's", alice, again)
	}
	if bob == alice || seed("bob") != bob {
		t.Errorf("alice's zygote and bob's: hash seeds %q and %q", alice, bob)
	}
	e.Close()
	if left := leakcheck.WaitClean(before, leakOpts, 5*time.Second); len(left) > 0 {
		t.Errorf("left after the engine closed: %v", left)
	}
}
